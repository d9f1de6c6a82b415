package posixtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Changes made through the filesystem are visible at once to the next
// call: what a cache of names, attributes or listings could break.

// CreateAfterMiss looks up names that do not exist, then makes each
// kind of entry under them: every one is found at once.
func CreateAfterMiss(t *testing.T, dir string) {
	target := filepath.Join(dir, "target")
	writeFile(t, target, "t")
	makers := map[string]func(p string) error{
		"file":    func(p string) error { return os.WriteFile(p, []byte("x"), 0644) },
		"dir":     func(p string) error { return os.Mkdir(p, 0755) },
		"symlink": func(p string) error { return os.Symlink("target", p) },
		"link":    func(p string) error { return os.Link(target, p) },
		"fifo":    func(p string) error { return unix.Mkfifo(p, 0644) },
		"renamed": func(p string) error {
			writeFile(t, p+".tmp", "r")
			return unix.Rename(p+".tmp", p)
		},
	}
	for name, mk := range makers {
		p := filepath.Join(dir, name)
		for i := 0; i < 2; i++ { // twice: a cached miss is asked again
			wantGone(t, p)
		}
		check(t, mk(p), "make "+name)
		lstat(t, p)
		if names := listNames(t, dir); names[name] != 1 {
			t.Fatalf("%s not listed after it was made: %v", name, names)
		}
	}
}

// RemoveThenMiss removes entries that were just looked up and listed:
// each is gone at once, by name and from the listing.
func RemoveThenMiss(t *testing.T, dir string) {
	for _, n := range []string{"a", "b", "c"} {
		writeFile(t, filepath.Join(dir, n), n)
	}
	check(t, os.Mkdir(filepath.Join(dir, "d"), 0755), "Mkdir")
	eq(t, "entries", len(listNames(t, dir)), 4)
	for _, n := range []string{"a", "b", "c", "d"} {
		lstat(t, filepath.Join(dir, n))
	}
	check(t, os.Remove(filepath.Join(dir, "a")), "Remove")
	check(t, os.Remove(filepath.Join(dir, "d")), "Rmdir")
	check(t, unix.Rename(filepath.Join(dir, "b"), filepath.Join(dir, "c")), "Rename")
	for _, n := range []string{"a", "b", "d"} {
		wantGone(t, filepath.Join(dir, n))
	}
	wantContent(t, filepath.Join(dir, "c"), "b")
	names := listNames(t, dir)
	eq(t, "entries after removal", len(names), 1)
	eq(t, "c listed", names["c"], 1)
}

// AttrsFollowChanges checks that size, mode, owner, times and link
// count read right after each change made through another descriptor
// or name.
func AttrsFollowChanges(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, "12345")
	eq(t, "size", lstat(t, p).Size, 5)
	f := open(t, p, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("678"))
	eq(t, "size after append through a descriptor", lstat(t, p).Size, 8)
	check(t, os.Truncate(p, 2), "Truncate")
	eq(t, "size after truncate", fstat(t, f).Size, 2)
	check(t, os.Chmod(p, 0600), "Chmod")
	eq(t, "mode after chmod", fstat(t, f).Mode&07777, 0600)
	check(t, os.Link(p, filepath.Join(dir, "g")), "Link")
	eq(t, "nlink after link", fstat(t, f).Nlink, 2)
	old := time.Unix(1234567890, 0)
	check(t, os.Chtimes(filepath.Join(dir, "g"), old, old), "Chtimes")
	eq(t, "mtime through the other name", lstat(t, p).Mtim.Sec, old.Unix())
	check(t, os.Remove(filepath.Join(dir, "g")), "Remove")
	eq(t, "nlink after unlink", lstat(t, p).Nlink, 1)
}

// dirStep is a change of a directory's entries.
type dirStep struct {
	what string
	do   func() error
}

// dirTimesSteps runs each step on directory d, its times set in the
// past before each, and checks that the step moved its mtime and ctime.
func dirTimesSteps(t *testing.T, d string, steps []dirStep) {
	t.Helper()
	old := time.Unix(1000000000, 0)
	for _, s := range steps {
		check(t, os.Chtimes(d, old, old), "Chtimes")
		before := lstat(t, d)
		time.Sleep(10 * time.Millisecond)
		check(t, s.do(), s.what)
		after := lstat(t, d)
		if after.Mtim.Sec == old.Unix() {
			t.Fatalf("directory mtime unchanged by %s", s.what)
		}
		if unix.TimespecToNsec(after.Ctim) <= unix.TimespecToNsec(before.Ctim) {
			t.Fatalf("directory ctime unchanged by %s", s.what)
		}
	}
}

// DirTimes checks that making, removing and renaming entries updates
// the directory's mtime and ctime.
func DirTimes(t *testing.T, dir string) {
	d := filepath.Join(dir, "d")
	check(t, os.Mkdir(d, 0755), "Mkdir")
	steps := []dirStep{
		{"create", func() error { return os.WriteFile(filepath.Join(d, "f"), nil, 0644) }},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(d, "sub"), 0755) }},
		{"rename", func() error { return unix.Rename(filepath.Join(d, "f"), filepath.Join(d, "g")) }},
		{"unlink", func() error { return os.Remove(filepath.Join(d, "g")) }},
		{"rmdir", func() error { return os.Remove(filepath.Join(d, "sub")) }},
	}
	dirTimesSteps(t, d, steps)
}

// DirTimesLinkMknod checks that link, mkfifo, mknod and symlink update
// the parent directory's mtime and ctime, as DirTimes does for the
// other changes of a directory.
func DirTimesLinkMknod(t *testing.T, dir string) {
	d := filepath.Join(dir, "d")
	check(t, os.Mkdir(d, 0755), "Mkdir")
	src := filepath.Join(dir, "src")
	writeFile(t, src, "x")
	steps := []dirStep{
		{"link", func() error { return os.Link(src, filepath.Join(d, "l")) }},
		{"mkfifo", func() error { return unix.Mkfifo(filepath.Join(d, "p"), 0644) }},
		{"mknod fifo", func() error { return unix.Mknod(filepath.Join(d, "q"), unix.S_IFIFO|0644, 0) }},
		{"mknod socket", func() error { return unix.Mknod(filepath.Join(d, "s"), unix.S_IFSOCK|0644, 0) }},
		{"mknod file", func() error { return unix.Mknod(filepath.Join(d, "r"), unix.S_IFREG|0644, 0) }},
		{"symlink", func() error { return os.Symlink("x", filepath.Join(d, "y")) }},
	}
	dirTimesSteps(t, d, steps)
}

// RmdirOpenDir removes a directory that is open: reading it yields
// nothing more and nothing can be made in it.
func RmdirOpenDir(t *testing.T, dir string) {
	d := filepath.Join(dir, "d")
	check(t, os.Mkdir(d, 0755), "Mkdir")
	fd := openDir(t, d)
	check(t, unix.Rmdir(d), "Rmdir")
	var st unix.Stat_t
	check(t, unix.Fstat(fd, &st), "Fstat")
	eq(t, "nlink of removed dir", st.Nlink, 0)
	buf := make([]byte, 4096)
	n, err := unix.Getdents(fd, buf)
	if err == nil && n != 0 {
		t.Fatalf("Getdents of a removed directory: %d bytes", n)
	}
	_, err = unix.Openat(fd, "new", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0644)
	wantErrno(t, err, unix.ENOENT, "create in a removed directory")
	wantGone(t, d)
	check(t, os.Mkdir(d, 0755), "Mkdir again")
	eq(t, "new dir entries", len(listNames(t, d)), 0)
}

// RecreateDifferentType replaces names with entries of another type:
// lookups see the new type at once.
func RecreateDifferentType(t *testing.T, dir string) {
	p := filepath.Join(dir, "x")
	for i := 0; i < 3; i++ {
		writeFile(t, p, fmt.Sprint(i))
		eq(t, "type file", lstat(t, p).Mode&unix.S_IFMT, unix.S_IFREG)
		check(t, os.Remove(p), "Remove file")
		check(t, os.Mkdir(p, 0755), "Mkdir")
		eq(t, "type dir", lstat(t, p).Mode&unix.S_IFMT, unix.S_IFDIR)
		check(t, os.Remove(p), "Rmdir")
		check(t, os.Symlink("nowhere", p), "Symlink")
		eq(t, "type symlink", lstat(t, p).Mode&unix.S_IFMT, unix.S_IFLNK)
		check(t, os.Remove(p), "Remove symlink")
	}
	wantGone(t, p)
}

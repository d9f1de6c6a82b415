package posixtest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Directories: making and removing them, and listing them.

// MkdirRmdir checks mkdir and rmdir and their errors, and the parent's
// link count.
func MkdirRmdir(t *testing.T, dir string) {
	d := filepath.Join(dir, "d")
	nlink := lstat(t, dir).Nlink
	check(t, os.Mkdir(d, 0755), "Mkdir")
	eq(t, "type", lstat(t, d).Mode&unix.S_IFMT, unix.S_IFDIR)
	eq(t, "new dir nlink", lstat(t, d).Nlink, 2)
	eq(t, "parent nlink after mkdir", lstat(t, dir).Nlink, nlink+1)
	wantErrno(t, os.Mkdir(d, 0755), unix.EEXIST, "Mkdir existing")
	writeFile(t, filepath.Join(d, "f"), "x")
	wantErrno(t, os.Mkdir(filepath.Join(d, "f"), 0755), unix.EEXIST, "Mkdir over file")
	wantErrno(t, os.Mkdir(filepath.Join(d, "f", "g"), 0755), unix.ENOTDIR, "Mkdir under file")
	wantErrno(t, os.Mkdir(filepath.Join(dir, "missing", "g"), 0755), unix.ENOENT, "Mkdir under missing")
	wantErrno(t, unix.Rmdir(d), unix.ENOTEMPTY, "Rmdir non-empty")
	wantErrno(t, unix.Rmdir(filepath.Join(d, "f")), unix.ENOTDIR, "Rmdir file")
	wantErrno(t, unix.Unlink(d), unix.EISDIR, "Unlink directory")
	wantErrno(t, unix.Rmdir(d+"/."), unix.EINVAL, "Rmdir .")
	check(t, unix.Unlink(filepath.Join(d, "f")), "Unlink")
	check(t, unix.Rmdir(d), "Rmdir")
	wantGone(t, d)
	eq(t, "parent nlink after rmdir", lstat(t, dir).Nlink, nlink)
	wantErrno(t, unix.Rmdir(d), unix.ENOENT, "Rmdir again")
}

// ReaddirBig lists a directory of 3000 files in small batches: every
// name appears exactly once, with . and ..
func ReaddirBig(t *testing.T, dir string) {
	const n = 3000
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("file-%04d-%s", i, strings.Repeat("x", i%40))
		want[name] = true
		check(t, unix.Mknod(filepath.Join(dir, name), unix.S_IFREG|0644, 0), "Mknod")
	}
	for pass := 0; pass < 2; pass++ {
		seen := map[string]int{}
		for _, e := range readRest(t, openDir(t, dir), 4096) {
			seen[e.Name]++
		}
		eq(t, "entries", len(seen), n+2)
		for name, c := range seen {
			if c != 1 || !want[name] && name != "." && name != ".." {
				t.Fatalf("pass %d: %q listed %d times", pass, name, c)
			}
		}
	}
	ents, err := os.ReadDir(dir)
	check(t, err, "ReadDir")
	eq(t, "os.ReadDir entries", len(ents), n)
}

// ReaddirTypes checks each entry's d_type and that its d_ino is the
// inode number stat reports.
func ReaddirTypes(t *testing.T, dir string) {
	writeFile(t, filepath.Join(dir, "file"), "x")
	check(t, os.Mkdir(filepath.Join(dir, "dir"), 0755), "Mkdir")
	check(t, os.Symlink("file", filepath.Join(dir, "link")), "Symlink")
	check(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0644), "Mkfifo")
	want := map[string]uint8{"file": unix.DT_REG, "dir": unix.DT_DIR, "link": unix.DT_LNK,
		"fifo": unix.DT_FIFO, ".": unix.DT_DIR, "..": unix.DT_DIR}
	ents := readRest(t, openDir(t, dir), 4096)
	eq(t, "entries", len(ents), len(want))
	for _, e := range ents {
		typ, ok := want[e.Name]
		if !ok {
			t.Fatalf("unexpected entry %q", e.Name)
		}
		eq(t, "d_type of "+e.Name, e.Type, typ)
		if e.Name != ".." {
			eq(t, "d_ino of "+e.Name, e.Ino, lstat(t, filepath.Join(dir, e.Name)).Ino)
		}
	}
}

// ReaddirModify adds and removes entries while a listing is under way:
// entries untouched meanwhile appear exactly once, none twice.
func ReaddirModify(t *testing.T, dir string) {
	const n = 300
	initial := map[string]bool{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%03d", i)
		initial[name] = true
		writeFile(t, filepath.Join(dir, name), "")
	}
	fd := openDir(t, dir)
	seen := map[string]int{}
	for _, e := range getdents(t, fd, 1024) {
		seen[e.Name]++
	}
	if len(seen) == 0 || len(seen) >= n {
		t.Fatalf("first batch: %d entries, want some", len(seen))
	}
	removed := map[string]bool{}
	for name := range initial {
		if seen[name] == 0 && len(removed) < 50 {
			removed[name] = true
			check(t, os.Remove(filepath.Join(dir, name)), "Remove")
		}
	}
	for i := 0; i < 50; i++ {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("g%03d", i)), "")
	}
	for _, e := range readRest(t, fd, 1024) {
		seen[e.Name]++
	}
	for name, c := range seen {
		if c != 1 {
			t.Fatalf("%q listed %d times", name, c)
		}
	}
	for name := range initial {
		if !removed[name] && seen[name] != 1 {
			t.Fatalf("untouched %q listed %d times", name, seen[name])
		}
	}
	now := listNames(t, dir)
	eq(t, "entries after the changes", len(now), n)
	for name := range removed {
		if now[name] != 0 {
			t.Fatalf("removed %q still listed", name)
		}
	}
}

// ReaddirSeek is telldir/seekdir across opens: seeking a new descriptor
// to an entry's d_off lists exactly the entries after it, and seeking
// back to 0 lists all again.
func ReaddirSeek(t *testing.T, dir string) {
	for i := 0; i < 100; i++ {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("entry%03d", i)), "")
	}
	fd := openDir(t, dir)
	all := readRest(t, fd, 512)
	eq(t, "entries", len(all), 102)
	for _, i := range []int{0, 1, 17, 50, 100, 101} {
		fd2 := openDir(t, dir)
		_, err := unix.Seek(fd2, all[i].Off, 0)
		check(t, err, "Seek dir")
		rest := readRest(t, fd2, 512)
		if got, want := names(rest), names(all[i+1:]); got != want {
			t.Fatalf("after seeking to entry %d: got %s, want %s", i, got, want)
		}
	}
	_, err := unix.Seek(fd, 0, 0)
	check(t, err, "rewind")
	eq(t, "after rewind", names(readRest(t, fd, 4096)), names(all))
}

func names(ents []dirent) string {
	var s []string
	for _, e := range ents {
		s = append(s, e.Name)
	}
	return strings.Join(s, ",")
}

// DeepPath makes 100 nested directories with long names, walking with
// openat, so the whole path is longer than PATH_MAX.
func DeepPath(t *testing.T, dir string) {
	const depth = 100
	name := func(i int) string { return fmt.Sprintf("%03d-%s", i, strings.Repeat("d", 60)) }
	fd := openDir(t, dir)
	var total int
	for i := 0; i < depth; i++ {
		check(t, unix.Mkdirat(fd, name(i), 0755), fmt.Sprintf("Mkdirat level %d", i))
		fd = openAt(t, fd, name(i))
		total += len(name(i)) + 1
	}
	if total <= unix.PathMax {
		t.Fatalf("path length %d, want > %d", total, unix.PathMax)
	}
	lf, err := unix.Openat(fd, "leaf", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0644)
	check(t, err, "create leaf")
	unix.Write(lf, []byte("deep"))
	unix.Close(lf)
	fd = openDir(t, dir)
	for i := 0; i < depth; i++ {
		fd = openAt(t, fd, name(i))
	}
	var st unix.Stat_t
	check(t, unix.Fstatat(fd, "leaf", &st, unix.AT_SYMLINK_NOFOLLOW), "Fstatat leaf")
	eq(t, "leaf size", st.Size, 4)
	full := dir
	for i := 0; i < depth; i++ {
		full += "/" + name(i)
	}
	wantErrno(t, unix.Stat(full+"/leaf", &st), unix.ENAMETOOLONG, "Stat by full path")
}

// openAt opens name in directory fd; it is closed when the test ends.
func openAt(t *testing.T, fd int, name string) int {
	t.Helper()
	nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	check(t, err, "Openat "+name)
	t.Cleanup(func() { unix.Close(nfd) })
	return nfd
}

// OddNames creates files whose names hold spaces, newlines, control
// bytes, UTF-8, bytes that are not UTF-8 and 255 bytes, lists them back
// exactly and reads each.
func OddNames(t *testing.T, dir string) {
	odd := []string{"with space", " lead", "trail ", "new\nline", "tab\there", "ctl\x01\x7f",
		"ü日本語🙂", "bad\xff\xfeutf8", "back\\slash", `"quoted'`, "*?[]", "-dash", ".hidden", "...",
		strings.Repeat("n", 255), strings.Repeat("é", 127) + "x"}
	for _, name := range odd {
		writeFile(t, filepath.Join(dir, name), name)
	}
	got := listNames(t, dir)
	eq(t, "entries", len(got), len(odd))
	for _, name := range odd {
		eq(t, fmt.Sprintf("listings of %q", name), got[name], 1)
		wantContent(t, filepath.Join(dir, name), name)
	}
	sorted := append([]string(nil), odd...)
	sort.Strings(sorted)
	ents, err := os.ReadDir(dir)
	check(t, err, "ReadDir")
	for i, e := range ents {
		eq(t, "sorted entry", e.Name(), sorted[i])
	}
}

// NameTooLong checks that a 256-byte name is refused with ENAMETOOLONG
// by every call that takes one.
func NameTooLong(t *testing.T, dir string) {
	long := filepath.Join(dir, strings.Repeat("L", 256))
	ok := filepath.Join(dir, strings.Repeat("L", 255))
	writeFile(t, ok, "x")
	var st unix.Stat_t
	wantErrno(t, unix.Lstat(long, &st), unix.ENAMETOOLONG, "Lstat")
	_, err := os.OpenFile(long, os.O_CREATE|os.O_WRONLY, 0644)
	wantErrno(t, err, unix.ENAMETOOLONG, "create")
	wantErrno(t, os.Mkdir(long, 0755), unix.ENAMETOOLONG, "Mkdir")
	wantErrno(t, os.Symlink("x", long), unix.ENAMETOOLONG, "Symlink")
	wantErrno(t, os.Link(ok, long), unix.ENAMETOOLONG, "Link")
	wantErrno(t, unix.Rename(ok, long), unix.ENAMETOOLONG, "Rename")
	wantErrno(t, unix.Mkfifo(long, 0644), unix.ENAMETOOLONG, "Mkfifo")
	wantContent(t, ok, "x")
}

package posixtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Symbolic and hard links.

// Symlink makes relative and absolute symlinks and follows them.
func Symlink(t *testing.T, dir string) {
	p := filepath.Join(dir, "file")
	writeFile(t, p, "content")
	rel, abs := filepath.Join(dir, "rel"), filepath.Join(dir, "abs")
	check(t, os.Symlink("file", rel), "Symlink relative")
	check(t, os.Symlink(p, abs), "Symlink absolute")
	for _, c := range []struct{ link, target string }{{rel, "file"}, {abs, p}} {
		got, err := os.Readlink(c.link)
		check(t, err, "Readlink")
		eq(t, "target", got, c.target)
		st := lstat(t, c.link)
		eq(t, "type", st.Mode&unix.S_IFMT, unix.S_IFLNK)
		eq(t, "size", st.Size, int64(len(c.target)))
		var fst unix.Stat_t
		check(t, unix.Stat(c.link, &fst), "Stat through link")
		eq(t, "inode through link", fst.Ino, lstat(t, p).Ino)
		wantContent(t, c.link, "content")
	}
	check(t, os.Mkdir(filepath.Join(dir, "d"), 0755), "Mkdir")
	check(t, os.Symlink("d", filepath.Join(dir, "dl")), "Symlink to dir")
	writeFile(t, filepath.Join(dir, "dl", "inner"), "in")
	wantContent(t, filepath.Join(dir, "d", "inner"), "in")
	wantErrno(t, os.Symlink("x", rel), unix.EEXIST, "Symlink over existing")
	_, err := os.Readlink(p)
	wantErrno(t, err, unix.EINVAL, "Readlink of a file")
}

// SymlinkDangling checks a symlink to nothing: lstat works, stat and open
// fail, and O_CREAT through it creates the target.
func SymlinkDangling(t *testing.T, dir string) {
	l := filepath.Join(dir, "l")
	check(t, os.Symlink("target", l), "Symlink")
	eq(t, "type", lstat(t, l).Mode&unix.S_IFMT, unix.S_IFLNK)
	var st unix.Stat_t
	wantErrno(t, unix.Stat(l, &st), unix.ENOENT, "Stat")
	_, err := os.Open(l)
	wantErrno(t, err, unix.ENOENT, "Open")
	f := open(t, l, os.O_CREATE|os.O_WRONLY, 0644)
	f.Write([]byte("made"))
	wantContent(t, filepath.Join(dir, "target"), "made")
	eq(t, "still a symlink", lstat(t, l).Mode&unix.S_IFMT, unix.S_IFLNK)

	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	check(t, os.Symlink("b", a), "Symlink a")
	check(t, os.Symlink("a", b), "Symlink b")
	wantErrno(t, unix.Stat(a, &st), unix.ELOOP, "Stat of a loop")
}

// SymlinkLong stores a target of the longest length allowed, 4095 bytes,
// and refuses one byte more.
func SymlinkLong(t *testing.T, dir string) {
	target := strings.Repeat("abcdefg/", 512)[:4095]
	l := filepath.Join(dir, "l")
	check(t, os.Symlink(target, l), "Symlink")
	got, err := os.Readlink(l)
	check(t, err, "Readlink")
	eq(t, "target length", len(got), len(target))
	eq(t, "target", got, target)
	eq(t, "size", lstat(t, l).Size, int64(len(target)))
	wantErrno(t, os.Symlink(target+"x", filepath.Join(dir, "l2")), unix.ENAMETOOLONG, "Symlink of 4096 bytes")
}

// HardLink checks link counts, shared inode and data, and link errors.
func HardLink(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, "one")
	check(t, os.Link(a, b), "Link")
	sa, sb := lstat(t, a), lstat(t, b)
	eq(t, "inode", sb.Ino, sa.Ino)
	eq(t, "nlink of a", sa.Nlink, 2)
	eq(t, "nlink of b", sb.Nlink, 2)
	f := open(t, b, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("two"))
	wantContent(t, a, "onetwo")
	eq(t, "size through a", lstat(t, a).Size, 6)
	eq(t, "nlink by fstat", fstat(t, f).Nlink, 2)

	wantErrno(t, os.Link(a, b), unix.EEXIST, "Link over existing")
	wantErrno(t, os.Link(filepath.Join(dir, "missing"), filepath.Join(dir, "c")), unix.ENOENT, "Link missing")
	check(t, os.Mkdir(filepath.Join(dir, "d"), 0755), "Mkdir")
	wantErrno(t, os.Link(filepath.Join(dir, "d"), filepath.Join(dir, "d2")), unix.EPERM, "Link directory")

	check(t, os.Remove(a), "Remove a")
	eq(t, "nlink after unlink", lstat(t, b).Nlink, 1)
	eq(t, "nlink by fstat after unlink", fstat(t, f).Nlink, 1)
	wantContent(t, b, "onetwo")
	check(t, os.Link(b, filepath.Join(dir, "d", "c")), "Link into subdirectory")
	eq(t, "nlink after link into subdirectory", lstat(t, b).Nlink, 2)

	s := filepath.Join(dir, "s")
	check(t, os.Symlink("b", s), "Symlink")
	check(t, unix.Linkat(unix.AT_FDCWD, s, unix.AT_FDCWD, filepath.Join(dir, "s2"), 0), "Linkat symlink")
	s2 := lstat(t, filepath.Join(dir, "s2"))
	eq(t, "linked symlink type", s2.Mode&unix.S_IFMT, unix.S_IFLNK)
	eq(t, "linked symlink inode", s2.Ino, lstat(t, s).Ino)
	eq(t, "symlink nlink", s2.Nlink, 2)
}

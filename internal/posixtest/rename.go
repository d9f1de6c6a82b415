package posixtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Rename in its forms.

// RenameFile moves a file to a new name in the same directory; it keeps
// its inode and an open descriptor keeps working.
func RenameFile(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, "data")
	ino := lstat(t, a).Ino
	f := open(t, a, os.O_RDWR, 0)
	check(t, unix.Rename(a, b), "Rename")
	wantGone(t, a)
	eq(t, "inode", lstat(t, b).Ino, ino)
	f.WriteAt([]byte("D"), 0)
	wantContent(t, b, "Data")
	check(t, unix.Rename(b, b), "Rename to itself")
	wantContent(t, b, "Data")
	wantErrno(t, unix.Rename(a, b), unix.ENOENT, "Rename missing")
	names := listNames(t, dir)
	eq(t, "entries", len(names), 1)
	eq(t, "listed b", names["b"], 1)
}

// RenameOverFile replaces a file; the replaced file stays readable
// through a descriptor. A rename between two links of one file does
// nothing.
func RenameOverFile(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, "new")
	writeFile(t, b, "old")
	ino := lstat(t, a).Ino
	old := open(t, b, os.O_RDONLY, 0)
	check(t, unix.Rename(a, b), "Rename over file")
	wantGone(t, a)
	wantContent(t, b, "new")
	eq(t, "inode", lstat(t, b).Ino, ino)
	wantFDContent(t, old, "old")
	eq(t, "nlink of replaced", fstat(t, old).Nlink, 0)

	c := filepath.Join(dir, "c")
	check(t, os.Link(b, c), "Link")
	check(t, unix.Rename(b, c), "Rename onto another link of the same file")
	wantContent(t, b, "new")
	wantContent(t, c, "new")
}

// RenameOverLinkCtime renames over a file still reachable by a hard
// link: that inode loses a link, and its ctime moves, seen through the
// other name and through a descriptor.
func RenameOverLinkCtime(t *testing.T, dir string) {
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	writeFile(t, a, "new")
	writeFile(t, b, "old")
	check(t, os.Link(b, c), "Link")
	f := open(t, c, os.O_RDONLY, 0)
	before := lstat(t, c)
	eq(t, "nlink before", before.Nlink, 2)
	time.Sleep(20 * time.Millisecond)
	check(t, unix.Rename(a, b), "Rename over a linked file")
	after := lstat(t, c)
	eq(t, "nlink through the other link", after.Nlink, 1)
	if unix.TimespecToNsec(after.Ctim) <= unix.TimespecToNsec(before.Ctim) {
		t.Fatalf("ctime of the replaced inode: got %v, want after %v", after.Ctim, before.Ctim)
	}
	eq(t, "ctime by fstat", fstat(t, f).Ctim, after.Ctim)
	eq(t, "nlink by fstat", fstat(t, f).Nlink, 1)
	wantContent(t, c, "old")
	wantContent(t, b, "new")
}

// RenameDir moves directories over empty ones, and checks the errors of
// the moves that are not allowed.
func RenameDir(t *testing.T, dir string) {
	d1, d2, d3 := filepath.Join(dir, "d1"), filepath.Join(dir, "d2"), filepath.Join(dir, "d3")
	for _, d := range []string{d1, d2, d3} {
		check(t, os.Mkdir(d, 0755), "Mkdir")
	}
	writeFile(t, filepath.Join(d1, "child"), "c")
	writeFile(t, filepath.Join(d3, "child"), "c3")
	f := filepath.Join(dir, "f")
	writeFile(t, f, "f")
	check(t, unix.Rename(d1, d2), "Rename dir over empty dir")
	wantGone(t, d1)
	wantContent(t, filepath.Join(d2, "child"), "c")
	wantErrno(t, unix.Rename(d2, d3), unix.ENOTEMPTY, "Rename over non-empty dir")
	wantErrno(t, unix.Rename(f, d3), unix.EISDIR, "Rename file over dir")
	wantErrno(t, unix.Rename(d3, f), unix.ENOTDIR, "Rename dir over file")
	wantErrno(t, unix.Rename(d2, filepath.Join(d2, "sub")), unix.EINVAL, "Rename dir into itself")
	wantContent(t, filepath.Join(d3, "child"), "c3")
	wantContent(t, f, "f")

	check(t, os.Mkdir(d1, 0755), "Mkdir old name again")
	wantGone(t, filepath.Join(d1, "child"))
	writeFile(t, filepath.Join(d1, "child"), "fresh")
	wantContent(t, filepath.Join(d2, "child"), "c")
}

// RenameOtherDir moves a file and a directory to other directories;
// the parents' link counts follow the directory.
func RenameOtherDir(t *testing.T, dir string) {
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	check(t, os.Mkdir(src, 0755), "Mkdir")
	check(t, os.Mkdir(dst, 0755), "Mkdir")
	writeFile(t, filepath.Join(src, "f"), "file")
	check(t, os.Mkdir(filepath.Join(src, "sub"), 0755), "Mkdir")
	writeFile(t, filepath.Join(src, "sub", "g"), "deeper")
	check(t, unix.Rename(filepath.Join(src, "f"), filepath.Join(dst, "f2")), "Rename file")
	wantContent(t, filepath.Join(dst, "f2"), "file")
	wantGone(t, filepath.Join(src, "f"))
	check(t, unix.Rename(filepath.Join(src, "sub"), filepath.Join(dst, "sub")), "Rename dir")
	wantContent(t, filepath.Join(dst, "sub", "g"), "deeper")
	wantGone(t, filepath.Join(src, "sub"))
	eq(t, "src nlink", lstat(t, src).Nlink, 2)
	eq(t, "dst nlink", lstat(t, dst).Nlink, 3)
	var st unix.Stat_t
	check(t, unix.Stat(filepath.Join(dst, "sub", ".."), &st), "Stat ..")
	eq(t, "moved dir's ..", st.Ino, lstat(t, dst).Ino)
	eq(t, "src entries", len(listNames(t, src)), 0)
	eq(t, "dst entries", len(listNames(t, dst)), 2)
}

// RenameNoreplace refuses to replace an existing name with EEXIST and
// leaves both files alone.
func RenameNoreplace(t *testing.T, dir string) {
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	writeFile(t, a, "A")
	writeFile(t, b, "B")
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
	wantErrno(t, err, unix.EEXIST, "RENAME_NOREPLACE over existing")
	wantContent(t, a, "A")
	wantContent(t, b, "B")
	check(t, unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, c, unix.RENAME_NOREPLACE), "RENAME_NOREPLACE to new name")
	wantGone(t, a)
	wantContent(t, c, "A")
}

// RenameExchange swaps a file and a directory, and two files in
// different directories.
func RenameExchange(t *testing.T, dir string) {
	f, d := filepath.Join(dir, "f"), filepath.Join(dir, "d")
	writeFile(t, f, "file")
	check(t, os.Mkdir(d, 0755), "Mkdir")
	writeFile(t, filepath.Join(d, "inner"), "in")
	fino, dino := lstat(t, f).Ino, lstat(t, d).Ino
	check(t, unix.Renameat2(unix.AT_FDCWD, f, unix.AT_FDCWD, d, unix.RENAME_EXCHANGE), "RENAME_EXCHANGE")
	eq(t, "f is now the dir", lstat(t, f).Mode&unix.S_IFMT, unix.S_IFDIR)
	eq(t, "d is now the file", lstat(t, d).Mode&unix.S_IFMT, unix.S_IFREG)
	eq(t, "inode of f", lstat(t, f).Ino, dino)
	eq(t, "inode of d", lstat(t, d).Ino, fino)
	wantContent(t, d, "file")
	wantContent(t, filepath.Join(f, "inner"), "in")

	sub := filepath.Join(f, "inner")
	g := open(t, d, os.O_RDONLY, 0)
	check(t, unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, sub, unix.RENAME_EXCHANGE), "RENAME_EXCHANGE across dirs")
	wantContent(t, sub, "file")
	wantContent(t, d, "in")
	wantFDContent(t, g, "file")
	err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, filepath.Join(dir, "missing"), unix.RENAME_EXCHANGE)
	wantErrno(t, err, unix.ENOENT, "RENAME_EXCHANGE with missing")
	wantContent(t, d, "in")
}

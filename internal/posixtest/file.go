package posixtest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Regular files: creation, reading and writing, sizes and times.

// FileBasic writes a new file, reads it back through the same and a new
// descriptor and checks its type and size.
func FileBasic(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f := open(t, p, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0644)
	const content = "hello world\n"
	n, err := f.Write([]byte(content))
	check(t, err, "Write")
	eq(t, "written", n, len(content))
	wantFDContent(t, f, content)
	st := fstat(t, f)
	eq(t, "type", st.Mode&unix.S_IFMT, unix.S_IFREG)
	eq(t, "size", st.Size, int64(len(content)))
	eq(t, "nlink", st.Nlink, 1)
	check(t, f.Close(), "Close")
	wantContent(t, p, content)
	eq(t, "size by path", lstat(t, p).Size, int64(len(content)))
}

// OpenErrors checks the errors of opening what cannot be opened so.
func OpenErrors(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, "x")
	check(t, os.Symlink("f", filepath.Join(dir, "l")), "Symlink")
	cases := []struct {
		path  string
		flags int
		want  unix.Errno
	}{
		{"missing", unix.O_RDONLY, unix.ENOENT},
		{"missing/x", unix.O_RDONLY | unix.O_CREAT, unix.ENOENT},
		{"f/x", unix.O_RDONLY, unix.ENOTDIR},
		{"f", unix.O_RDONLY | unix.O_DIRECTORY, unix.ENOTDIR},
		{".", unix.O_RDWR, unix.EISDIR},
		{".", unix.O_WRONLY | unix.O_CREAT, unix.EISDIR},
		{"l", unix.O_RDONLY | unix.O_NOFOLLOW, unix.ELOOP},
	}
	for _, c := range cases {
		fd, err := unix.Open(filepath.Join(dir, c.path), c.flags|unix.O_CLOEXEC, 0644)
		if err == nil {
			unix.Close(fd)
		}
		wantErrno(t, err, c.want, "open "+c.path)
	}
	f := open(t, p, os.O_RDONLY, 0)
	_, err := f.Write([]byte("y"))
	wantErrno(t, err, unix.EBADF, "write to O_RDONLY fd")
	g := open(t, p, os.O_WRONLY, 0)
	_, err = g.Read(make([]byte, 1))
	wantErrno(t, err, unix.EBADF, "read from O_WRONLY fd")
}

// OpenExcl checks O_CREAT|O_EXCL on new and existing names, including a
// dangling symlink, which it must not follow.
func OpenExcl(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	open(t, p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0644).Write([]byte("first"))
	_, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0644)
	wantErrno(t, err, unix.EEXIST, "second O_EXCL create")
	_, err = os.OpenFile(dir, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0644)
	wantErrno(t, err, unix.EEXIST, "O_EXCL create of a directory")
	open(t, p, os.O_CREATE|os.O_WRONLY, 0644)
	wantContent(t, p, "first")

	l := filepath.Join(dir, "dangling")
	check(t, os.Symlink("target", l), "Symlink")
	_, err = os.OpenFile(l, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0644)
	wantErrno(t, err, unix.EEXIST, "O_EXCL create through a dangling symlink")
	wantGone(t, filepath.Join(dir, "target"))
}

// OpenTrunc checks that O_TRUNC empties an existing file, and that
// O_CREAT|O_TRUNC does too.
func OpenTrunc(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, "hello")
	f := open(t, p, os.O_WRONLY|os.O_TRUNC, 0)
	eq(t, "size after O_TRUNC (fstat)", fstat(t, f).Size, 0)
	eq(t, "size after O_TRUNC (stat)", lstat(t, p).Size, 0)
	f.Write([]byte("ab"))
	check(t, f.Close(), "Close")
	wantContent(t, p, "ab")
	open(t, p, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0644)
	wantContent(t, p, "")
}

// AppendWrite checks that O_APPEND writes go to the end of the file
// whatever the offset, also when another descriptor extended it.
func AppendWrite(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, "abc")
	f := open(t, p, os.O_WRONLY|os.O_APPEND, 0)
	_, err := f.Seek(0, io.SeekStart)
	check(t, err, "Seek")
	_, err = f.Write([]byte("def"))
	check(t, err, "Write")
	g := open(t, p, os.O_WRONLY, 0)
	_, err = g.WriteAt([]byte("XYZ"), 6)
	check(t, err, "WriteAt")
	_, err = f.Write([]byte("ghi"))
	check(t, err, "Write")
	pos, err := f.Seek(0, io.SeekCurrent)
	check(t, err, "Seek")
	eq(t, "offset after append", pos, 12)
	wantContent(t, p, "abcdefXYZghi")
	h := open(t, p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0644)
	h.Write([]byte("!"))
	wantContent(t, p, "abcdefXYZghi!")
}

// Truncate shrinks and grows a file by path.
func Truncate(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, "0123456789")
	check(t, unix.Truncate(p, 4), "Truncate to 4")
	wantContent(t, p, "0123")
	check(t, unix.Truncate(p, 8), "Truncate to 8")
	wantContent(t, p, "0123\x00\x00\x00\x00")
	check(t, unix.Truncate(p, 0), "Truncate to 0")
	wantContent(t, p, "")
	wantErrno(t, unix.Truncate(filepath.Join(dir, "missing"), 0), unix.ENOENT, "Truncate missing")
	wantErrno(t, unix.Truncate(dir, 0), unix.EISDIR, "Truncate directory")
}

// Ftruncate shrinks and grows an open file; the offset is unchanged.
func Ftruncate(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f := open(t, p, os.O_CREATE|os.O_RDWR, 0644)
	f.Write([]byte("0123456789"))
	check(t, f.Truncate(3), "Ftruncate to 3")
	eq(t, "size", fstat(t, f).Size, 3)
	wantFDContent(t, f, "012")
	_, err := f.Write([]byte("x")) // at offset 10: a hole from 3 to 10
	check(t, err, "Write")
	wantContent(t, p, "012\x00\x00\x00\x00\x00\x00\x00x")
	check(t, f.Truncate(16), "Ftruncate to 16")
	eq(t, "size by path", lstat(t, p).Size, 16)
	r := open(t, p, os.O_RDONLY, 0)
	wantErrno(t, unix.Ftruncate(int(r.Fd()), 0), unix.EINVAL, "Ftruncate of O_RDONLY fd")
}

// PreadPwrite reads and writes at offsets without moving the file
// offset, and reads past the end.
func PreadPwrite(t *testing.T, dir string) {
	f := open(t, filepath.Join(dir, "f"), os.O_CREATE|os.O_RDWR, 0644)
	f.Write([]byte("0123456789"))
	_, err := f.WriteAt([]byte("ab"), 3)
	check(t, err, "WriteAt")
	pos, _ := f.Seek(0, io.SeekCurrent)
	eq(t, "offset after pwrite", pos, 10)
	buf := make([]byte, 4)
	_, err = f.ReadAt(buf, 2)
	check(t, err, "ReadAt")
	eq(t, "pread", string(buf), "2ab5")
	n, err := unix.Pread(int(f.Fd()), buf, 10)
	check(t, err, "pread at EOF")
	eq(t, "bytes at EOF", n, 0)
	n, err = unix.Pread(int(f.Fd()), buf, 1000)
	check(t, err, "pread past EOF")
	eq(t, "bytes past EOF", n, 0)
	_, err = f.WriteAt([]byte("z"), 20)
	check(t, err, "WriteAt past EOF")
	wantFDContent(t, f, "012ab56789\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00z")
	f.Write([]byte("!")) // still at offset 10
	wantFDContent(t, f, "012ab56789!\x00\x00\x00\x00\x00\x00\x00\x00\x00z")
}

// SparseFile writes far beyond the end: the gap reads as zeros and
// takes no space.
func SparseFile(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f := open(t, p, os.O_CREATE|os.O_RDWR, 0644)
	const off = 16 << 20
	_, err := f.WriteAt([]byte("end"), off)
	check(t, err, "WriteAt")
	check(t, f.Sync(), "Fsync")
	st := lstat(t, p)
	eq(t, "size", st.Size, off+3)
	if st.Blocks*512 >= 1<<20 {
		t.Fatalf("blocks: got %d (%d bytes), want a sparse file", st.Blocks, st.Blocks*512)
	}
	buf := make([]byte, 64<<10)
	_, err = f.ReadAt(buf, 8<<20)
	check(t, err, "ReadAt hole")
	if !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Fatalf("hole does not read as zeros")
	}
	tail := make([]byte, 3)
	f.ReadAt(tail, off)
	eq(t, "tail", string(tail), "end")
}

// UnlinkOpenFile unlinks a file that is open: the descriptor still reads
// and writes it, and a new file of the same name is another file.
func UnlinkOpenFile(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f := open(t, p, os.O_CREATE|os.O_RDWR, 0644)
	f.Write([]byte("hello"))
	check(t, os.Remove(p), "Unlink")
	wantGone(t, p)
	if names := listNames(t, dir); names["f"] != 0 {
		t.Fatalf("unlinked name still listed: %v", names)
	}
	st := fstat(t, f)
	eq(t, "nlink after unlink", st.Nlink, 0)
	eq(t, "size after unlink", st.Size, 5)
	wantFDContent(t, f, "hello")
	f.Write([]byte(" world"))
	wantFDContent(t, f, "hello world")
	check(t, f.Truncate(2), "Ftruncate")
	wantFDContent(t, f, "he")
	writeFile(t, p, "new")
	wantContent(t, p, "new")
	wantFDContent(t, f, "he")
}

// LargeFile round-trips 8 MiB of random data, read back whole and in
// odd-sized pieces.
func LargeFile(t *testing.T, dir string) {
	data := make([]byte, 8<<20)
	rand.Read(data)
	want := sha256.Sum256(data)
	p := filepath.Join(dir, "big")
	check(t, os.WriteFile(p, data, 0644), "WriteFile")
	eq(t, "size", lstat(t, p).Size, int64(len(data)))
	got, err := os.ReadFile(p)
	check(t, err, "ReadFile")
	eq(t, "sha256 of whole read", sha256.Sum256(got), want)
	f := open(t, p, os.O_RDONLY, 0)
	h := sha256.New()
	buf := make([]byte, 12345)
	_, err = io.CopyBuffer(h, struct{ io.Reader }{f}, buf)
	check(t, err, "read in pieces")
	eq(t, "sha256 of pieces", [32]byte(h.Sum(nil)), want)
	mid := make([]byte, 100000)
	_, err = f.ReadAt(mid, 3<<20+7)
	check(t, err, "ReadAt")
	if !bytes.Equal(mid, data[3<<20+7:][:len(mid)]) {
		t.Fatalf("ReadAt in the middle differs")
	}
}

// WriteUpdatesTimes checks that a write sets mtime and ctime to now, a
// truncate too, and chmod changes ctime but not mtime.
func WriteUpdatesTimes(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, "a")
	old := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	check(t, os.Chtimes(p, old, old), "Chtimes")
	before := lstat(t, p)
	eq(t, "mtime set", unix.TimespecToNsec(before.Mtim), old.UnixNano())
	time.Sleep(20 * time.Millisecond) // let the clock tick past ctime
	f := open(t, p, os.O_WRONLY, 0)
	_, err := f.WriteAt([]byte("b"), 1)
	check(t, err, "WriteAt")
	after := lstat(t, p)
	if mt := time.Unix(0, unix.TimespecToNsec(after.Mtim)); time.Since(mt) > time.Minute || mt.Before(old.Add(time.Hour)) {
		t.Fatalf("mtime after write: got %v, want about now", mt)
	}
	if unix.TimespecToNsec(after.Ctim) <= unix.TimespecToNsec(before.Ctim) {
		t.Fatalf("ctime after write: got %v, want after %v", after.Ctim, before.Ctim)
	}
	check(t, os.Chtimes(p, old, old), "Chtimes")
	time.Sleep(20 * time.Millisecond)
	check(t, f.Truncate(1), "Ftruncate")
	if st := lstat(t, p); unix.TimespecToNsec(st.Mtim) == old.UnixNano() {
		t.Fatalf("mtime unchanged by ftruncate")
	}
	check(t, os.Chtimes(p, old, old), "Chtimes")
	before = lstat(t, p)
	time.Sleep(20 * time.Millisecond)
	check(t, os.Chmod(p, 0600), "Chmod")
	after = lstat(t, p)
	eq(t, "mtime after chmod", unix.TimespecToNsec(after.Mtim), old.UnixNano())
	if unix.TimespecToNsec(after.Ctim) <= unix.TimespecToNsec(before.Ctim) {
		t.Fatalf("ctime after chmod: got %v, want after %v", after.Ctim, before.Ctim)
	}
}

// CopyFileRange copies between two files of the directory with
// copy_file_range, at offsets.
func CopyFileRange(t *testing.T, dir string) {
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	data := make([]byte, 300000)
	rand.Read(data)
	check(t, os.WriteFile(src, data, 0644), "WriteFile")
	writeFile(t, dst, "head:")
	in := open(t, src, os.O_RDONLY, 0)
	out := open(t, dst, os.O_WRONLY, 0)
	roff, woff := int64(1000), int64(5)
	var copied int
	for copied < 200000 {
		n, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, 200000-copied, 0)
		check(t, err, "copy_file_range")
		if n == 0 {
			t.Fatalf("copy_file_range: copied %d, want 200000", copied)
		}
		copied += n
	}
	got, err := os.ReadFile(dst)
	check(t, err, "ReadFile")
	want := append([]byte("head:"), data[1000:201000]...)
	if !bytes.Equal(got, want) {
		t.Fatalf("copy differs: got %d bytes, want %d", len(got), len(want))
	}
}

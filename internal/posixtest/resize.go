package posixtest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Sizes after truncation and writes past the end, and writes through a
// descriptor whose name moved: what a file system that keeps sizes of
// its own (a staging copy, attributes cached in the kernel) must keep
// current.

// wantSize checks a file's size by fstat, lseek(SEEK_END) and by path;
// f's offset stays.
func wantSize(t *testing.T, f *os.File, p string, want int64) {
	t.Helper()
	eq(t, "size (fstat)", fstat(t, f).Size, want)
	pos, err := f.Seek(0, io.SeekCurrent)
	check(t, err, "lseek(SEEK_CUR)")
	end, err := f.Seek(0, io.SeekEnd)
	check(t, err, "lseek(SEEK_END)")
	eq(t, "size (SEEK_END)", end, want)
	_, err = f.Seek(pos, io.SeekStart)
	check(t, err, "lseek(SEEK_SET)")
	eq(t, "size (stat)", lstat(t, p).Size, want)
}

// OpenTruncAfterStat truncates a file by opening it with O_TRUNC after
// its size was looked at, then writes past the end.
func OpenTruncAfterStat(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, string(bytes.Repeat([]byte("a"), 300)))
	eq(t, "size before", lstat(t, p).Size, 300)
	f := open(t, p, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0644)
	wantSize(t, f, p, 0)
	_, err := f.WriteAt([]byte("0123456789"), 100)
	check(t, err, "pwrite")
	wantSize(t, f, p, 110)
	check(t, f.Close(), "Close")
	wantContent(t, p, string(make([]byte, 100))+"0123456789")
}

// TruncateThenPwrite: open(O_CREAT|O_TRUNC), ftruncate(0), pwrite 10
// bytes at 100: the size is 110 at once, and after close.
func TruncateThenPwrite(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f := open(t, p, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0644)
	check(t, f.Truncate(0), "ftruncate(0)")
	_, err := f.WriteAt([]byte("0123456789"), 100)
	check(t, err, "pwrite")
	wantSize(t, f, p, 110)
	check(t, f.Close(), "Close")
	eq(t, "size after close", lstat(t, p).Size, 110)
	wantContent(t, p, string(make([]byte, 100))+"0123456789")
}

// TruncateThenAppend: write 100 bytes, ftruncate(10), append 100 bytes
// (O_APPEND, and at the offset after a seek to the end): 110.
func TruncateThenAppend(t *testing.T, dir string) {
	data := bytes.Repeat([]byte("x"), 100)
	for _, appendMode := range []bool{true, false} {
		p := filepath.Join(dir, "f")
		flags := os.O_CREATE | os.O_TRUNC | os.O_RDWR
		if appendMode {
			flags |= os.O_APPEND
		}
		f := open(t, p, flags, 0644)
		_, err := f.Write(data)
		check(t, err, "write 100")
		check(t, f.Truncate(10), "ftruncate(10)")
		if !appendMode {
			_, err = f.Seek(0, io.SeekEnd)
			check(t, err, "lseek(SEEK_END)")
		}
		_, err = f.Write(data)
		check(t, err, "write 100 more")
		wantSize(t, f, p, 110)
		check(t, f.Close(), "Close")
		eq(t, "size after close", lstat(t, p).Size, 110)
		wantContent(t, p, string(data[:10])+string(data))
	}
}

// TruncateShrinkStays shrinks a written file by path, from 2,420,736 to
// 546,446 bytes, with and without a descriptor open on it: it stays
// shrunk when looked at again, also after a close and a reopen.
func TruncateShrinkStays(t *testing.T, dir string) {
	const big, small = 2420736, 546446
	data := bytes.Repeat([]byte("0123456789abcdef"), big/16)
	for _, keepOpen := range []bool{false, true} {
		p := filepath.Join(dir, "f")
		f := open(t, p, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0644)
		_, err := f.Write(data)
		check(t, err, "write")
		if !keepOpen {
			check(t, f.Close(), "Close")
		}
		check(t, unix.Truncate(p, small), "truncate")
		eq(t, "size after truncate", lstat(t, p).Size, small)
		if keepOpen {
			wantSize(t, f, p, small)
			check(t, f.Close(), "Close")
		}
		g := open(t, p, os.O_RDWR, 0)
		wantSize(t, g, p, small)
		got, err := io.ReadAll(g)
		check(t, err, "read")
		eq(t, "bytes read", len(got), small)
		eq(t, "content", bytes.Equal(got, data[:small]), true)
		check(t, g.Close(), "Close")
		eq(t, "size after reopen", lstat(t, p).Size, small)
	}
}

// RenameOpenThenWrite creates a file, moves it into a subdirectory while
// it is open, then writes it through the descriptor: the writes are in
// the file at its new name, by size and content.
func RenameOpenThenWrite(t *testing.T, dir string) {
	a := filepath.Join(dir, "a")
	sub := filepath.Join(dir, "sub")
	check(t, os.Mkdir(sub, 0755), "Mkdir")
	b := filepath.Join(sub, "b")
	f := open(t, a, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0644)
	check(t, os.Rename(a, b), "Rename")
	want := bytes.Repeat([]byte("0123456789"), 3752)
	_, err := f.Write(want)
	check(t, err, "write")
	_, err = f.Write([]byte("tail"))
	check(t, err, "write")
	want = append(want, "tail"...)
	eq(t, "size while open", lstat(t, b).Size, int64(len(want)))
	check(t, f.Close(), "Close")
	wantGone(t, a)
	eq(t, "size after close", lstat(t, b).Size, int64(len(want)))
	wantContent(t, b, string(want))
	g := open(t, b, os.O_WRONLY|os.O_APPEND, 0)
	check(t, os.Rename(b, a), "Rename back")
	_, err = g.Write([]byte("!"))
	check(t, err, "append")
	check(t, g.Close(), "Close")
	wantContent(t, a, string(want)+"!")
}

// SparsePast2G writes one byte at 2 GiB+1 and closes (a file of 2 GiB
// of hole), reads it back, fsyncs, then appends through a new
// descriptor: the size and bytes are right, the file stays sparse, and
// the process's memory peak (the file system's too, where it runs in
// the process) grows by far less than the file's size.
func SparsePast2G(t *testing.T, dir string) {
	const off = 2<<30 + 1
	base := rss(t, "VmRSS")
	resetPeak(t)
	p := filepath.Join(dir, "f")
	f := open(t, p, os.O_CREATE|os.O_RDWR, 0644)
	_, err := f.WriteAt([]byte("x"), off)
	check(t, err, "pwrite at 2 GiB+1")
	check(t, f.Sync(), "fsync")
	check(t, f.Close(), "Close")
	eq(t, "size", lstat(t, p).Size, off+1)
	g := open(t, p, os.O_RDWR|os.O_APPEND, 0)
	_, err = g.Write([]byte("y"))
	check(t, err, "append")
	wantSize(t, g, p, off+2)
	buf := make([]byte, 4)
	n, err := g.ReadAt(buf, off-1)
	if err != io.EOF {
		check(t, err, "pread")
	}
	eq(t, "bytes at the end", string(buf[:n]), "\x00xy")
	check(t, g.Sync(), "fsync")
	check(t, g.Close(), "Close")
	if st := lstat(t, p); st.Blocks*512 > 64<<20 {
		t.Errorf("%d bytes allocated for 2 bytes of data: the hole was filled", st.Blocks*512)
	}
	if grew := rss(t, "VmHWM") - base; grew > 256<<20 {
		t.Errorf("memory peak grew by %d MiB for a sparse file of 2 GiB", grew>>20)
	}
}

// rss returns a field of /proc/self/status (VmRSS, VmHWM) in bytes.
func rss(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	check(t, err, "read /proc/self/status")
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			var kb int64
			_, err := fmt.Sscanf(string(bytes.TrimSpace(v)), "%d kB", &kb)
			check(t, err, "parse "+field)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeak resets the process's memory peak (VmHWM) to its resident
// size now.
func resetPeak(t *testing.T) {
	t.Helper()
	check(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0), "reset VmHWM")
}

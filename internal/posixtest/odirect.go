package posixtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// O_DIRECT reads and writes, alone and beside buffered ones.

const block = 4096

// openDirect opens path with O_DIRECT and flags; it is closed when the
// test ends.
func openDirect(t *testing.T, path string, flags int) int {
	t.Helper()
	fd, err := unix.Open(path, flags|unix.O_DIRECT|unix.O_CLOEXEC, 0644)
	check(t, err, "open O_DIRECT")
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// wantBlock fails the test unless fd holds block bytes of want at off,
// read into an aligned buffer.
func wantBlock(t *testing.T, what string, fd int, off int64, want byte) {
	t.Helper()
	buf := alignedBuf(t, block, 0)
	n, err := unix.Pread(fd, buf, off)
	check(t, err, what)
	eq(t, what+": bytes read", n, block)
	if i := bytes.IndexFunc(buf, func(r rune) bool { return r != rune(want) }); i >= 0 {
		t.Fatalf("%s: byte %d is %q, want %q", what, off+int64(i), buf[i], want)
	}
}

// pwriteBlock writes block bytes of fill at off through fd.
func pwriteBlock(t *testing.T, what string, fd int, off int64, fill byte) {
	t.Helper()
	n, err := unix.Pwrite(fd, alignedBuf(t, block, fill), off)
	check(t, err, what)
	eq(t, what+": bytes written", n, block)
}

// ODirect writes and reads aligned blocks with O_DIRECT, past the end
// too, and reads them back buffered after close.
func ODirect(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0644)
	check(t, err, "open O_DIRECT")
	pwriteBlock(t, "direct write 0", fd, 0, 'a')
	pwriteBlock(t, "direct write 2", fd, 2*block, 'c')
	pwriteBlock(t, "direct write 1", fd, block, 'b')
	wantBlock(t, "direct read 0", fd, 0, 'a')
	wantBlock(t, "direct read 1", fd, block, 'b')
	wantBlock(t, "direct read 2", fd, 2*block, 'c')
	var st unix.Stat_t
	check(t, unix.Fstat(fd, &st), "Fstat")
	eq(t, "size", st.Size, 3*block)
	check(t, unix.Close(fd), "Close") // not closed again: another test may hold its number by then
	got, err := os.ReadFile(p)
	check(t, err, "ReadFile")
	want := bytes.Repeat([]byte("a"), block)
	want = append(append(want, bytes.Repeat([]byte("b"), block)...), bytes.Repeat([]byte("c"), block)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("buffered read after close: %d bytes, not the %d written", len(got), len(want))
	}
	fd = openDirect(t, p, unix.O_RDWR|unix.O_TRUNC)
	check(t, unix.Fstat(fd, &st), "Fstat")
	eq(t, "size after O_TRUNC", st.Size, 0)
}

// ODirectBesideBuffered keeps a buffered and an O_DIRECT descriptor on
// one file: each sees what the other wrote, over blocks the other had
// read before (so cached pages must not hide a direct write).
func ODirectBesideBuffered(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	b := int(open(t, p, os.O_CREATE|os.O_RDWR, 0644).Fd())
	d := openDirect(t, p, unix.O_RDWR)
	pwriteBlock(t, "buffered write 0", b, 0, 'a')
	wantBlock(t, "direct read of a buffered write", d, 0, 'a')
	pwriteBlock(t, "direct write 1", d, block, 'b')
	wantBlock(t, "buffered read of a direct write", b, block, 'b')
	pwriteBlock(t, "direct write over 0", d, 0, 'c')
	wantBlock(t, "buffered read of a direct overwrite", b, 0, 'c')
	pwriteBlock(t, "buffered write over 1", b, block, 'd')
	wantBlock(t, "direct read of a buffered overwrite", d, block, 'd')
	var st unix.Stat_t
	check(t, unix.Fstat(d, &st), "Fstat direct")
	eq(t, "size", st.Size, 2*block)
	m, err := unix.Mmap(b, 0, 2*block, unix.PROT_READ, unix.MAP_SHARED)
	check(t, err, "Mmap")
	defer unix.Munmap(m)
	pwriteBlock(t, "direct write under a mapping", d, 0, 'e')
	// Read through the kernel (mapGet), never by a fault in Go code: a
	// test process serving its own mount would deadlock (mmap.go).
	eq(t, "mapped byte after a direct write", mapGet(t, m[:1])[0], byte('e'))
}

package posixtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Memory-mapped files.
//
// The tests touch mapped memory only inside system calls, copying it
// through a memfd with pwrite and pread. A page fault on a file that
// the test process serves itself, taken in Go code, cannot be
// preempted: a stop-the-world (for the GC) would wait for it while the
// FUSE server goroutines it waits for stand stopped.

func mmap(t *testing.T, f *os.File, size, prot, flags int) []byte {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), 0, size, prot, flags)
	check(t, err, "Mmap")
	t.Cleanup(func() { unix.Munmap(m) })
	return m
}

// memfd returns a memfd, closed when the test ends.
func memfd(t *testing.T) int {
	t.Helper()
	fd, err := unix.MemfdCreate("posixtest", unix.MFD_CLOEXEC)
	check(t, err, "MemfdCreate")
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// mapGet returns a copy of mapped memory m.
func mapGet(t *testing.T, m []byte) []byte {
	t.Helper()
	fd := memfd(t)
	n, err := unix.Pwrite(fd, m, 0)
	check(t, err, "copy from the mapping")
	eq(t, "bytes copied from the mapping", n, len(m))
	out := make([]byte, len(m))
	_, err = unix.Pread(fd, out, 0)
	check(t, err, "pread memfd")
	return out
}

// mapPut copies data into mapped memory m.
func mapPut(t *testing.T, m, data []byte) {
	t.Helper()
	fd := memfd(t)
	_, err := unix.Pwrite(fd, data, 0)
	check(t, err, "pwrite memfd")
	n, err := unix.Pread(fd, m[:len(data)], 0)
	check(t, err, "copy into the mapping")
	eq(t, "bytes copied into the mapping", n, len(data))
}

// MmapRead maps a file for reading: it holds the file's data, and a
// write through a descriptor shows in the mapping.
func MmapRead(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	data := bytes.Repeat([]byte("mapped!"), 2000)
	check(t, os.WriteFile(p, data, 0644), "WriteFile")
	f := open(t, p, os.O_RDONLY, 0)
	m := mmap(t, f, len(data), unix.PROT_READ, unix.MAP_SHARED)
	if !bytes.Equal(mapGet(t, m), data) {
		t.Fatalf("mapping differs from the file")
	}
	w := open(t, p, os.O_WRONLY, 0)
	_, err := w.WriteAt([]byte("XYZ"), 5000)
	check(t, err, "WriteAt")
	eq(t, "mapping after write", string(mapGet(t, m[5000:5003])), "XYZ")
}

// MmapWrite changes a file through a shared writable mapping: after
// msync the data reads back through descriptors; a private mapping's
// changes stay private.
func MmapWrite(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f := open(t, p, os.O_CREATE|os.O_RDWR, 0644)
	const size = 3*4096 + 100
	check(t, f.Truncate(size), "Ftruncate")
	m := mmap(t, f, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i % 251)
	}
	mapPut(t, m, want)
	check(t, unix.Msync(m, unix.MS_SYNC), "Msync")
	got := make([]byte, size)
	_, err := open(t, p, os.O_RDONLY, 0).ReadAt(got, 0)
	check(t, err, "ReadAt through a new open")
	if !bytes.Equal(got, want) {
		t.Fatalf("data written through the mapping differs")
	}
	check(t, unix.Munmap(m), "Munmap")
	f.Close()
	got, err = os.ReadFile(p)
	check(t, err, "ReadFile after close")
	if !bytes.Equal(got, want) {
		t.Fatalf("data after unmap and close differs")
	}
	eq(t, "size", lstat(t, p).Size, size)

	g := open(t, p, os.O_RDWR, 0)
	priv := mmap(t, g, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	mapPut(t, priv, []byte("private"))
	eq(t, "private mapping", string(mapGet(t, priv[:7])), "private")
	got, _ = os.ReadFile(p)
	if !bytes.Equal(got, want) {
		t.Fatalf("a private mapping's change reached the file")
	}
}

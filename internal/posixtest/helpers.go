package posixtest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// check fails the test if err is not nil.
func check(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantErrno fails the test unless err is the errno want.
func wantErrno(t *testing.T, err error, want syscall.Errno, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

// eq fails the test unless got equals want.
func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// withUmask sets the process umask for the rest of the test.
func withUmask(t *testing.T, mask int) {
	old := unix.Umask(mask)
	t.Cleanup(func() { unix.Umask(old) })
}

// open opens path and closes it when the test ends.
func open(t *testing.T, path string, flags int, perm os.FileMode) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, flags, perm)
	check(t, err, "open "+filepath.Base(path))
	t.Cleanup(func() { f.Close() })
	return f
}

func writeFile(t *testing.T, path string, data string) {
	t.Helper()
	check(t, os.WriteFile(path, []byte(data), 0644), "WriteFile")
}

// wantContent fails the test unless path holds want.
func wantContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	check(t, err, "ReadFile "+filepath.Base(path))
	if string(got) != want {
		t.Fatalf("content of %s: got %q, want %q", filepath.Base(path), got, want)
	}
}

// wantFDContent fails the test unless f, read from offset 0, holds want.
func wantFDContent(t *testing.T, f *os.File, want string) {
	t.Helper()
	buf := make([]byte, len(want)+16)
	n, err := f.ReadAt(buf, 0)
	if err != nil && n != len(want) {
		t.Fatalf("ReadAt: %v", err)
	}
	if string(buf[:n]) != want {
		t.Fatalf("content through fd: got %q, want %q", buf[:n], want)
	}
}

func lstat(t *testing.T, path string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	check(t, unix.Lstat(path, &st), "Lstat "+filepath.Base(path))
	return st
}

func fstat(t *testing.T, f *os.File) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	check(t, unix.Fstat(int(f.Fd()), &st), "Fstat")
	return st
}

// wantGone fails the test unless path does not exist.
func wantGone(t *testing.T, path string) {
	t.Helper()
	var st unix.Stat_t
	wantErrno(t, unix.Lstat(path, &st), unix.ENOENT, "Lstat "+filepath.Base(path))
}

// dirent is one parsed getdents64 record.
type dirent struct {
	Name string
	Ino  uint64
	Off  int64
	Type uint8
}

// getdents reads one batch of entries from a directory fd with a buffer
// of size bytes; none means the end.
func getdents(t *testing.T, fd, size int) []dirent {
	t.Helper()
	buf := make([]byte, size)
	n, err := unix.Getdents(fd, buf)
	check(t, err, "Getdents")
	var out []dirent
	for b := buf[:n]; len(b) >= 19; {
		reclen := int(binary.LittleEndian.Uint16(b[16:]))
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		out = append(out, dirent{Name: string(name), Ino: binary.LittleEndian.Uint64(b),
			Off: int64(binary.LittleEndian.Uint64(b[8:])), Type: b[18]})
		b = b[reclen:]
	}
	return out
}

// readRest reads a directory fd to its end in batches of size bytes.
func readRest(t *testing.T, fd, size int) []dirent {
	t.Helper()
	var all []dirent
	for {
		ents := getdents(t, fd, size)
		if len(ents) == 0 {
			return all
		}
		all = append(all, ents...)
	}
}

// openDir opens a directory for getdents; it is closed when the test ends.
func openDir(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	check(t, err, "open dir")
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// listNames returns how often each name (but . and ..) appears in a
// full listing of path.
func listNames(t *testing.T, path string) map[string]int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	check(t, err, "open dir")
	defer unix.Close(fd)
	seen := map[string]int{}
	for _, e := range readRest(t, fd, 4096) {
		if e.Name != "." && e.Name != ".." {
			seen[e.Name]++
		}
	}
	return seen
}

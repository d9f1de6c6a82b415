package posixtest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Space allocation, holes and syncing.

// fallocate calls fallocate(2), skipping the test where the filesystem
// does not support mode.
func fallocate(t *testing.T, f *os.File, mode uint32, off, length int64) {
	t.Helper()
	err := unix.Fallocate(int(f.Fd()), mode, off, length)
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("fallocate mode %#x: %v", mode, err)
	}
	check(t, err, "Fallocate")
}

// Fallocate allocates space, growing the file or, with KEEP_SIZE, not.
func Fallocate(t *testing.T, dir string) {
	f := open(t, filepath.Join(dir, "f"), os.O_CREATE|os.O_RDWR, 0644)
	fallocate(t, f, 0, 0, 1<<20)
	st := fstat(t, f)
	eq(t, "size", st.Size, 1<<20)
	if st.Blocks*512 < 1<<20 {
		t.Fatalf("blocks after fallocate: %d, want at least 1 MiB", st.Blocks)
	}
	fallocate(t, f, unix.FALLOC_FL_KEEP_SIZE, 1<<20, 1<<20)
	st = fstat(t, f)
	eq(t, "size after KEEP_SIZE", st.Size, 1<<20)
	if st.Blocks*512 < 2<<20 {
		t.Fatalf("blocks after fallocate KEEP_SIZE: %d, want at least 2 MiB", st.Blocks)
	}
	buf := make([]byte, 1<<20)
	_, err := f.ReadAt(buf, 0)
	check(t, err, "ReadAt")
	if !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Fatalf("allocated space does not read as zeros")
	}
}

// PunchHole deallocates the middle of a file: it reads as zeros, the
// size stays and the blocks go.
func PunchHole(t *testing.T, dir string) {
	f := open(t, filepath.Join(dir, "f"), os.O_CREATE|os.O_RDWR, 0644)
	data := bytes.Repeat([]byte{0xaa}, 1<<20)
	f.Write(data)
	check(t, f.Sync(), "Fsync")
	before := fstat(t, f).Blocks
	fallocate(t, f, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 256<<10, 256<<10)
	st := fstat(t, f)
	eq(t, "size", st.Size, 1<<20)
	if st.Blocks >= before {
		t.Fatalf("blocks after punching: %d, want fewer than %d", st.Blocks, before)
	}
	got := make([]byte, 1<<20)
	_, err := f.ReadAt(got, 0)
	check(t, err, "ReadAt")
	copy(data[256<<10:512<<10], make([]byte, 256<<10))
	if !bytes.Equal(got, data) {
		t.Fatalf("content after punching a hole differs")
	}
}

// SeekDataHole finds data and holes in a sparse file with SEEK_DATA and
// SEEK_HOLE.
func SeekDataHole(t *testing.T, dir string) {
	f := open(t, filepath.Join(dir, "f"), os.O_CREATE|os.O_RDWR, 0644)
	const second = 4 << 20
	f.WriteAt(bytes.Repeat([]byte{1}, 4096), 0)
	f.WriteAt(bytes.Repeat([]byte{2}, 4096), second)
	const size = second + 4096
	fd := int(f.Fd())
	seek := func(off int64, whence int) int64 {
		t.Helper()
		pos, err := unix.Seek(fd, off, whence)
		check(t, err, "Seek")
		return pos
	}
	eq(t, "SEEK_DATA from 0", seek(0, unix.SEEK_DATA), 0)
	hole := seek(0, unix.SEEK_HOLE)
	if hole < 4096 || hole > second {
		t.Fatalf("SEEK_HOLE from 0: got %d, want in [4096, %d]", hole, second)
	}
	if data := seek(hole, unix.SEEK_DATA); data < hole || data > second {
		t.Fatalf("SEEK_DATA from the hole: got %d, want in [%d, %d]", data, hole, second)
	}
	eq(t, "SEEK_HOLE in the last data", seek(second+10, unix.SEEK_HOLE), size)
	_, err := unix.Seek(fd, size, unix.SEEK_DATA)
	wantErrno(t, err, unix.ENXIO, "SEEK_DATA at EOF")
	_, err = unix.Seek(fd, size+100, unix.SEEK_HOLE)
	wantErrno(t, err, unix.ENXIO, "SEEK_HOLE past EOF")
	eq(t, "SEEK_END", seek(-10, unix.SEEK_END), size-10)
}

// Fsync syncs files open for writing and reading, and a directory.
func Fsync(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f := open(t, p, os.O_CREATE|os.O_WRONLY, 0644)
	f.Write([]byte("synced"))
	check(t, f.Sync(), "fsync")
	check(t, unix.Fdatasync(int(f.Fd())), "fdatasync")
	r := open(t, p, os.O_RDONLY, 0)
	check(t, r.Sync(), "fsync of O_RDONLY fd")
	check(t, open(t, dir, os.O_RDONLY, 0).Sync(), "fsync of a directory")
	wantFDContent(t, r, "synced")
	check(t, unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE), "sync_file_range")
}

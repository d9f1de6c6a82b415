package overlay

import (
	"os"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// dataChunk bounds the data of one WBWrite.
const dataChunk = upstream.MaxIO

// dataReader turns an upper file into WBWrite ops, one per chunk of its
// data extents (holes are skipped: the first op truncates the host's
// file to the size, which leaves them holes there too). The file is
// read when its ops are sent, so they carry its data as it is then; a
// change after that has a newer ctime and mtime, which the next pass
// sees.
type dataReader struct {
	f     *os.File
	path  string // host path
	size  int64
	off   int64
	first bool
	done  bool
}

// openData opens upper file rel beneath upper.
func openData(upper, rel, hostPath string) (*dataReader, error) {
	dfd, name, err := openParent(upper, rel)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	unix.Close(dfd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, unwrap(err)
	}
	return &dataReader{f: f, path: hostPath, size: fi.Size(), first: true}, nil
}

// next returns the next op, and false when there is none.
func (d *dataReader) next() (upstream.WBOp, bool, error) {
	if d.done {
		return upstream.WBOp{}, false, nil
	}
	op := upstream.WBOp{Kind: upstream.WBWrite, Path: d.path, First: d.first, Size: uint64(d.size)}
	start, end := d.extent()
	if start >= end {
		d.done = true
		if !d.first {
			return op, false, nil
		}
		d.first = false
		return op, true, nil // no data: the truncate alone
	}
	n := min(end-start, dataChunk)
	buf := make([]byte, n)
	k, err := d.f.ReadAt(buf, start)
	if k == 0 && err != nil {
		return op, false, unwrap(err)
	}
	op.Offset, op.Data = start, buf[:k]
	d.off, d.first = start+int64(k), false
	return op, true, nil
}

// extent returns the data extent at or after the offset, as much of it
// as lies within the size found at open.
func (d *dataReader) extent() (int64, int64) {
	if d.off >= d.size {
		return d.size, d.size
	}
	fd := int(d.f.Fd())
	start, err := unix.Seek(fd, d.off, unix.SEEK_DATA)
	if err != nil {
		return d.size, d.size // ENXIO: only a hole is left
	}
	end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
	if err != nil {
		end = d.size
	}
	return min(start, d.size), min(end, d.size)
}

func (d *dataReader) close() { d.f.Close() }

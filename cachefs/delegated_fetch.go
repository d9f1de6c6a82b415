package cachefs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cachefs/cachefs/upstream"
)

// Copying a host file into a staging file, when the guest first writes
// a file the host has. The copy goes through a buffer of one read
// (upstream.MaxIO), never the whole file in memory, and keeps holes:
// only the host's data ranges are read (SEEK_DATA, SEEK_HOLE), and a
// read that is all zeros is not written, so a sparse file of gigabytes
// costs its data, not its size, in memory, on the wire and on disk.

// fetchStaging copies n's host contents, size bytes, into a new staging
// file and returns its name; on error no file is left.
func (fs *FS) fetchStaging(n *node, size uint64) (string, error) {
	w := fs.wb
	w.mu.Lock()
	name, _ := w.takeSpareLocked()
	w.mu.Unlock()
	p := filepath.Join(w.dir, name)
	f, err := openPlain(p, os.O_RDWR|os.O_CREATE, 0600)
	if err != nil {
		return "", err
	}
	err = fs.fetchInto(n, f, int64(size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p)
		return "", err
	}
	return name, nil
}

// fetchInto copies n's host data up to size into f, which ends size
// bytes long.
func (fs *FS) fetchInto(n *node, f *os.File, size int64) error {
	st := fs.call(func(epoch uint64) error {
		up, err := fs.upID(n, epoch)
		if err != nil {
			return err
		}
		var oh upstream.OpenResp
		if err := fs.rpc(upstream.OpOpen, &upstream.OpenReq{Node: up, Flags: syscall.O_RDONLY}, &oh); err != nil {
			return err
		}
		defer fs.rpc(upstream.OpRelease, &upstream.HandleReq{Handle: oh.Handle}, &upstream.Empty{})
		if err := f.Truncate(0); err != nil { // a retry starts again
			return err
		}
		for off := int64(0); off < size; {
			start, end := int64(0), size
			if size > upstream.MaxIO { // a small file's holes are not worth a round trip
				start, end = fs.hostData(oh.Handle, off, size)
			}
			if start >= end {
				break
			}
			if off, err = fs.fetchRange(oh.Handle, f, start, end); err != nil {
				return err
			}
		}
		return f.Truncate(size)
	})
	return fs.status2err(st)
}

// fetchRange copies the host's bytes from start to end into f, leaving
// holes where they are all zeros, and returns where it stopped: end, or
// before it where the host file ends.
func (fs *FS) fetchRange(h uint64, f *os.File, start, end int64) (int64, error) {
	for off := start; off < end; {
		var r upstream.DataResp
		req := &upstream.ReadReq{Handle: h, Offset: off, Size: uint32(min(end-off, upstream.MaxIO))}
		if err := fs.rpc(upstream.OpRead, req, &r); err != nil {
			return off, err
		}
		if len(r.Data) == 0 {
			return end, nil // shorter than its attributes said: the rest is a hole
		}
		if !allZero(r.Data) {
			if _, err := f.WriteAt(r.Data, off); err != nil {
				return off, err
			}
		}
		off += int64(len(r.Data))
	}
	return end, nil
}

// hostData returns the host file's next data range at or after off,
// within size: start >= end when there is none. Where the host cannot
// tell, the rest is taken as data.
func (fs *FS) hostData(h uint64, off, size int64) (start, end int64) {
	var r upstream.LseekResp
	err := fs.rpc(upstream.OpLseek, &upstream.LseekReq{Handle: h, Offset: off, Whence: seekData}, &r)
	switch {
	case errors.Is(err, syscall.ENXIO):
		return size, size
	case err != nil:
		return off, size
	}
	start = r.Offset
	if err := fs.rpc(upstream.OpLseek, &upstream.LseekReq{Handle: h, Offset: start, Whence: seekHole}, &r); err != nil {
		return start, size
	}
	return start, min(r.Offset, size)
}

// smallFile is the size up to which a staging file is written back
// whole, holes and all: most files written are small, and their holes
// are not worth two lseeks and an open per write-back.
const smallFile = 64 << 10

// seekData and seekHole are lseek's SEEK_DATA and SEEK_HOLE.
const seekData, seekHole = 3, 4

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// dataRanges returns the size of the file at path and its data ranges
// (SEEK_DATA, SEEK_HOLE), each [start, end); where the file system
// cannot tell, and in files of at most smallFile bytes, the whole file
// is data. A missing file is empty.
func dataRanges(path string) (int64, [][2]int64) {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return 0, nil
	}
	if st.Size <= smallFile {
		if st.Size == 0 {
			return 0, nil
		}
		return st.Size, [][2]int64{{0, st.Size}}
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, nil
	}
	defer syscall.Close(fd)
	var out [][2]int64
	for off := int64(0); off < st.Size; {
		start, err := syscall.Seek(fd, off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			break
		}
		if err != nil {
			return st.Size, append(out, [2]int64{off, st.Size})
		}
		end, err := syscall.Seek(fd, start, seekHole)
		if err != nil || end > st.Size {
			end = st.Size
		}
		if end <= start {
			break
		}
		out = append(out, [2]int64{start, end})
		off = end
	}
	return st.Size, out
}

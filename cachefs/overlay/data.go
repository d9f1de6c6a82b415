package overlay

import (
	"os"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// dataChunk bounds the data of one WBWrite.
const dataChunk = upstream.MaxIO

// dataReader turns an upper file into write-back ops: a WBWrite per
// chunk of the file's data extents, the first truncating the host's
// file, then a WBSetattr of the size if the file ends in a hole. The
// truncate is to the file's size if it has no hole, else to nothing,
// so that the host's file has holes where the upper file has them (also
// where it had data before); truncating to nothing costs more on the
// host (ext4 writes the file's blocks at close after it).
//
// The file is read when its ops are sent, so they carry its data as it
// is then; a later write() has a newer mtime and raises IN_MODIFY,
// which the next pass sees. A write through a shared mapping raises no
// event and changes the mtime only when it makes a clean page dirty
// (page_mkwrite): so the writeback of the file's dirty pages to the
// guest's disk is started before it is read, which cleans them and
// write-protects their mappings, and a later write through a mapping
// faults, changing the mtime. The writeback is not waited for.
type dataReader struct {
	f     *os.File
	path  string // host path
	size  int64
	off   int64 // where the next extent is looked for
	first bool
	dense bool // no hole: one extent from 0 to size
	done  bool
	// open for writing by someone when opened (quiet.go)
	writer bool
}

// cleanPages starts the writeback of fd's dirty pages (after waiting
// for the pages already being written, which a write may have made
// dirty again).
func cleanPages(fd int) error {
	return unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE)
}

// openData opens upper file name in directory dfd.
func openData(dfd int, name, hostPath string) (*dataReader, error) {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	err = cleanPages(fd)
	var st unix.Stat_t
	if err == nil {
		err = unix.Fstat(fd, &st)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	d := &dataReader{f: os.NewFile(uintptr(fd), name), path: hostPath, size: st.Size, first: true, writer: hasWriter(fd)}
	start, end := d.extent()
	d.dense = start == 0 && end == d.size
	return d, nil
}

// next returns the next op, and false when there is none; its data is
// read into buf(n), n bytes.
func (d *dataReader) next(buf func(n int) []byte) (upstream.WBOp, bool, error) {
	if d.done {
		return upstream.WBOp{}, false, nil
	}
	start, end := d.extent()
	if start >= end {
		d.done = true
		return d.last()
	}
	b := buf(int(min(end-start, dataChunk)))
	k, err := d.f.ReadAt(b, start)
	if k == 0 && err != nil {
		return upstream.WBOp{}, false, unwrap(err)
	}
	op := upstream.WBOp{Kind: upstream.WBWrite, Path: d.path, First: d.first, Offset: start, Data: b[:k]}
	if d.first && d.dense {
		op.Size = uint64(d.size)
	}
	d.off, d.first = start+int64(k), false
	return op, true, nil
}

// last returns the op after the data, if one is needed: the truncate
// of a file without data, or the size of one that ends in a hole.
func (d *dataReader) last() (upstream.WBOp, bool, error) {
	switch {
	case d.first:
		return upstream.WBOp{Kind: upstream.WBWrite, Path: d.path, First: true, Size: uint64(d.size)}, true, nil
	case d.off < d.size:
		return upstream.WBOp{Kind: upstream.WBSetattr, Path: d.path, Valid: upstream.SetSize, Size: uint64(d.size)}, true, nil
	}
	return upstream.WBOp{}, false, nil
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

// written reports whether the file was open for writing when it was
// opened or is now: a write may then have been in progress as it was
// read.
func (d *dataReader) written() bool { return d.writer || hasWriter(int(d.f.Fd())) }

// hasWriter reports whether the file open as fd (read-only) is open
// for writing anywhere: a read lease is refused (EAGAIN) exactly then.
// A lease that cannot be had for another reason counts as a writer.
func hasWriter(fd int) bool {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		return true
	}
	unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
	return false
}

package cachefs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// The journal file. Lines are copied into a shared mapping of it (mem),
// within space that fallocate has added to its end: a change costs no
// system call, survives a SIGKILL of the daemon like a write(2) does
// (the page cache holds it), and cannot fault for want of space, which
// was allocated before. Where the filesystem cannot allocate ahead or
// map, past the mapping, or where a copy faults, lines are written with
// pwrite instead.
//
// So the file ends in zeros after its last line. A line's newline is
// stored after the rest of it, so that a copy cut short by a crash
// leaves a line without one; the reader stops at the first zero byte
// and drops an unterminated last line, and the next daemon cuts the
// file there before it appends.

// journalMap is the length of the journal's mapping; lines past it are
// written with pwrite. The journal is emptied whenever nothing waits and
// it has passed journalReset, so only a queue that never drains gets
// there.
const journalMap = 256 << 20

var errJournalFault = errors.New("journal mapping faulted")

// openJournal loads what a previous daemon left in the journal at p (see
// readJournal), then opens it for appending and maps it.
func (w *writeback) openJournal(p string) ([]*record, uint64, error) {
	old, done, end, err := readJournal(p)
	if err != nil {
		return nil, 0, err
	}
	f, err := w.openLockedJournal(p, 0)
	if err != nil {
		return nil, 0, err
	}
	if err := f.Truncate(end); err != nil { // no torn line, no zeros before the next
		f.Close()
		return nil, 0, err
	}
	os.Remove(p + ".new") // a replacement a crash cut short
	w.journal = f
	w.j.size, w.j.alloc = end, end
	w.mapJournalLocked()
	return old, done, nil
}

// openLockedJournal opens (creating) the journal file at p for reading
// and writing and takes its lock, which tells other daemons the state
// directory is in use.
func (w *writeback) openLockedJournal(p string, flags int) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC|flags, 0600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("state directory %s is in use by another daemon: %w", w.dir, err)
	}
	return f, nil
}

// readJournal loads the records a previous daemon left that the host
// did not have, the last marker's sequence number, and the length of
// the file's whole lines: a torn last line (a crash mid-append) and the
// zeros allocated after the last line are ignored.
func readJournal(p string) ([]*record, uint64, int64, error) {
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	var out []*record
	var done uint64
	var end int64
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF || bytes.IndexByte(line, 0) >= 0 {
			break
		}
		if err != nil {
			return nil, 0, 0, err
		}
		end += int64(len(line))
		r, err := decodeRecord(line)
		switch {
		case err != nil:
		case r.Done != 0:
			done = max(done, r.Done)
		default:
			out = append(out, r)
		}
	}
	out = slices.DeleteFunc(out, func(r *record) bool { return r.Seq <= done })
	return out, done, end, nil
}

// writeLineLocked appends one newline-terminated line to the journal,
// or nothing. Needs w.mu.
func (w *writeback) writeLineLocked(line []byte) error {
	end := w.j.size + int64(len(line))
	if w.j.mem != nil && end <= min(w.j.alloc, int64(len(w.j.mem))) {
		if copyLine(w.j.mem[w.j.size:end], line) == nil {
			w.j.size = end
			return nil
		}
		w.unmapLocked() // pwrite from here on
	}
	n, err := w.journal.WriteAt(line, w.j.size)
	if err != nil {
		w.journal.Truncate(w.j.size) // no torn line; gives back the room ahead
		w.j.alloc = w.j.size
		return err
	}
	w.j.size += int64(n)
	w.j.alloc = max(w.j.alloc, w.j.size)
	return nil
}

// copyLine copies line into dst, its final newline last. A fault (a
// filesystem that could not back the page after all) is an error, not
// a crash of the daemon.
func copyLine(dst, line []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			err = errJournalFault
		}
	}()
	n := len(line) - 1
	copy(dst[:n], line[:n])
	dst[n] = line[n]
	return nil
}

// mapJournalLocked maps the journal file, or leaves it to pwrite where
// it cannot be mapped. Needs w.mu.
func (w *writeback) mapJournalLocked() {
	mem, err := unix.Mmap(int(w.journal.Fd()), 0, journalMap, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err == nil {
		w.j.mem = mem
	}
}

// unmapLocked gives up the journal's mapping. Needs w.mu.
func (w *writeback) unmapLocked() {
	if w.j.mem != nil {
		unix.Munmap(w.j.mem)
		w.j.mem = nil
	}
}

// closeJournalLocked unmaps and closes the journal; what was copied into
// the mapping is in the page cache already. Needs w.mu.
func (w *writeback) closeJournalLocked() {
	w.unmapLocked()
	w.journal.Close()
}

// compactJournalLocked replaces the journal by one holding only the
// records that wait (replaceJournalLocked). It holds w.mu throughout, so
// it is kept for a journal past journalCompact: only a queue that never
// drains grows it that far. On failure (no space for the copy) the old
// journal stays as it was. Needs w.mu.
func (w *writeback) compactJournalLocked() error {
	if err := w.replaceJournalLocked(); err != nil {
		w.j.compactAt = w.j.size + journalCompact.Load() // not again at once
		return err
	}
	return nil
}

// replaceJournalLocked replaces the journal by a new file holding only
// the records that wait, written and synced before it is renamed over
// the old one, and the rename synced, so that a crash at any point
// leaves one whole journal, the old or the new. On failure the old
// journal stays as it was, and so does what w.j says of it. Needs w.mu.
func (w *writeback) replaceJournalLocked() error {
	p := filepath.Join(w.dir, "journal")
	f, err := w.openLockedJournal(p+".new", os.O_TRUNC)
	if err != nil {
		return err
	}
	size, err := w.writeRecordsLocked(f)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		w.crashPointLocked()
		err = os.Rename(p+".new", p)
	}
	if err != nil {
		f.Close()
		os.Remove(p + ".new")
		return err
	}
	w.crashPointLocked()
	if err := syncDir(w.dir); err != nil {
		w.fs.opts.Logf("cachefs: write-back journal: sync %s: %v", w.dir, err)
	}
	w.closeJournalLocked()
	w.journal = f
	w.j = journalState{noAlloc: w.j.noAlloc, size: size, alloc: size, compactAt: 2 * size, marked: w.done}
	w.mapJournalLocked()
	w.roomLocked()
	return nil
}

// writeRecordsLocked writes the records that wait as journal lines to
// f, in pieces of journalPiece bytes, and returns the bytes written.
// Needs w.mu.
func (w *writeback) writeRecordsLocked(f *os.File) (int64, error) {
	var buf []byte
	var size int64
	piece := int(journalPiece.Load())
	for i, r := range w.queue {
		buf = append(appendRecord(buf, r), '\n')
		if len(buf) < piece && i < len(w.queue)-1 {
			continue
		}
		n, err := f.Write(buf)
		size += int64(n)
		if err != nil {
			return size, err
		}
		buf = buf[:0]
		w.crashPointLocked()
	}
	return size, nil
}

// crashPointLocked calls the test's crash hook, if any: a crash of the
// daemon here leaves the state directory as it is now. Needs w.mu.
func (w *writeback) crashPointLocked() {
	if w.crashAt != nil {
		w.crashAt()
	}
}

// syncDir makes the names changed in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

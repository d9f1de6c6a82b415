package cachefs

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The write-back journal (writeback.go) must not acknowledge a change it
// cannot record. Space for records is allocated ahead of the journal's
// last line (fallocate, which extends the file with zeros that
// journal_file.go maps and copies lines into), and a change first makes sure
// of room for its record (roomLocked): where the state directory's
// filesystem cannot give it, the change fails with ENOSPC before it
// changes anything. An append that fails even so (a filesystem that
// cannot allocate ahead, or a run of closes, which queue contents without
// asking) is cut off, so that no torn line swallows the next record, and
// that record and the later ones wait in memory until the journal takes
// them; meanwhile fsync fails with the journal's error.

const (
	journalAhead = 64 << 10 // bytes allocated past the journal's end
	journalLow   = 16 << 10 // room a change needs: a record is under 14 KiB (two paths and a target)
	journalReset = 1 << 20  // a journal this long is emptied when nothing waits
)

// journalCompact is the length past which the journal is compacted
// although records wait (a queue that never drains): compactJournalLocked.
var journalCompact atomic.Int64

func init() { journalCompact.Store(64 << 20) }

// journalState is the journal file's bookkeeping; writeback.mu protects
// it.
type journalState struct {
	size, alloc int64     // bytes of whole lines; the file's length, allocated
	mem         []byte    // shared mapping of the file's first journalMap bytes, or nil
	noAlloc     bool      // the filesystem cannot allocate ahead
	compactAt   int64     // length past which it is compacted; 0: journalCompact
	err         error     // an append failed: records wait in unjournaled
	unjournaled []*record // in order; those the host has are skipped
}

// roomLocked makes sure the journal can take the record of one change.
// Needs w.mu.
func (w *writeback) roomLocked() error {
	if w.closed {
		return nil
	}
	if w.j.err != nil && !w.rejournalLocked() {
		return w.j.err
	}
	if w.j.noAlloc || w.j.alloc-w.j.size >= journalLow {
		return nil
	}
	err := unix.Fallocate(int(w.journal.Fd()), 0, w.j.alloc, w.j.size+journalAhead-w.j.alloc)
	switch {
	case err == nil:
		w.j.alloc = w.j.size + journalAhead
	case errors.Is(err, unix.EOPNOTSUPP):
		w.j.noAlloc = true
	default:
		return err
	}
	return nil
}

// appendLocked journals r, or keeps it in memory while the journal
// cannot take it. Needs w.mu.
func (w *writeback) appendLocked(r *record) {
	if w.j.err == nil {
		if w.j.err = w.writeRecordLocked(r); w.j.err == nil {
			return
		}
		w.fs.opts.Logf("cachefs: write-back journal: %v; later changes are kept in memory until it can be written", w.j.err)
	}
	w.j.unjournaled = append(w.j.unjournaled, r)
}

// writeRecordLocked appends one record line, or nothing. Needs w.mu.
func (w *writeback) writeRecordLocked(r *record) error {
	b, _ := json.Marshal(r)
	return w.writeLineLocked(append(b, '\n'))
}

// rejournalLocked writes the records kept in memory that the host does
// not have yet, and reports whether the journal is whole again. Needs
// w.mu.
func (w *writeback) rejournalLocked() bool {
	for len(w.j.unjournaled) > 0 {
		if r := w.j.unjournaled[0]; r.Seq > w.done {
			if err := w.writeRecordLocked(r); err != nil {
				w.j.err = err
				return false
			}
		}
		w.j.unjournaled = w.j.unjournaled[1:]
	}
	w.j.err = nil
	return true
}

// markDoneLocked records that the host has every change up to w.done:
// a marker line, which a replay skips the records before, or, where
// nothing waits and the journal has grown past journalReset, an empty
// journal. Emptying it after every batch would cost a truncate and an
// allocation each. While records wait in memory, or where a marker
// cannot be appended, the journal is written anew with only the waiting
// records: changes the host has must never be replayed, as their
// staging files are reused. Needs w.mu.
func (w *writeback) markDoneLocked() {
	if w.closed {
		return
	}
	if w.j.err != nil || len(w.queue) == 0 && w.j.size >= journalReset {
		w.rewriteJournalLocked()
		return
	}
	if w.j.size >= max(w.j.compactAt, journalCompact.Load()) && w.compactJournalLocked() == nil {
		return
	}
	line := strconv.AppendUint([]byte(`{"Done":`), w.done, 10)
	if w.writeLineLocked(append(line, "}\n"...)) != nil {
		w.rewriteJournalLocked()
	}
}

// rewriteJournalLocked empties the journal and appends the records that
// wait, then allocates ahead again while there is space. It works in
// place, as it must on a full disk: a crash of the daemon between the
// truncate and the last append would lose records. Where the journal
// has space, compactJournalLocked is used instead. Needs w.mu.
func (w *writeback) rewriteJournalLocked() {
	w.journal.Truncate(0)
	w.j = journalState{noAlloc: w.j.noAlloc, mem: w.j.mem}
	for _, r := range w.queue {
		w.appendLocked(r)
	}
	w.roomLocked()
}

// sync makes the journal durable; it fails while records wait in memory.
// A compaction may replace the file while it syncs outside w.mu: the new
// one was synced before it replaced the old, so what the old held is
// durable either way, and a sync that found the old one closed syncs the
// new one.
func (w *writeback) sync() error {
	for {
		w.mu.Lock()
		if w.j.err != nil && !w.closed && !w.rejournalLocked() {
			err := w.j.err
			w.mu.Unlock()
			return err
		}
		f := w.journal
		w.mu.Unlock()
		err := f.Sync()
		w.mu.Lock()
		replaced := w.journal != f && !w.closed
		w.mu.Unlock()
		if err == nil || !replaced {
			return err
		}
	}
}

package cachefs

import (
	"errors"
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
//
// A journal that lacks records or a marker is made whole again by
// replacing it (replaceJournalLocked: a new file written, synced and
// renamed over it), never by rewriting it in place, which a crash in the
// middle would leave without the records that wait. Where the state
// directory has no space for the copy, the old journal stays as it is
// and what it lacks is appended to it as far as space allows; the rest
// stays in memory, and changes and fsync fail with ENOSPC until it fits.
// Staging files whose records a replay would send again, the journal
// lacking their marker, are not recycled until it has it
// (recyclableLocked).

const (
	journalAhead = 64 << 10 // bytes allocated past the journal's end
	journalLow   = 16 << 10 // room a change needs: a record is under 14 KiB (two paths and a target)
	journalReset = 1 << 20  // a journal this long is emptied when nothing waits
)

// journalCompact is the length past which the journal is compacted
// although records wait (a queue that never drains): compactJournalLocked.
// journalPiece is how much of a new journal is written at a time
// (writeRecordsLocked). Tests make them small.
var journalCompact, journalPiece atomic.Int64

func init() {
	journalCompact.Store(64 << 20)
	journalPiece.Store(1 << 20)
}

// journalState is the journal file's bookkeeping; writeback.mu protects
// it.
type journalState struct {
	size, alloc int64     // bytes of whole lines; the file's length, allocated
	mem         []byte    // shared mapping of the file's first journalMap bytes, or nil
	noAlloc     bool      // the filesystem cannot allocate ahead
	compactAt   int64     // length past which it is compacted; 0: journalCompact
	marked      uint64    // a replay of the file skips the records up to marked
	err         error     // an append failed: records wait in unjournaled, or marked < w.done
	unjournaled []*record // in order; those the host has are skipped
	line        []byte    // the last line written, its buffer reused
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
	w.j.line = append(appendRecord(w.j.line[:0], r), '\n')
	return w.writeLineLocked(w.j.line)
}

// rejournalLocked appends what the journal lacks, the marker of what the
// host has and the records kept in memory that the host does not have
// yet, and reports whether the journal is whole again. Needs w.mu.
func (w *writeback) rejournalLocked() bool {
	if err := w.markLocked(); err != nil {
		w.j.err = err
		return false
	}
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

// markLocked appends a marker of w.done unless the journal has one.
// Needs w.mu.
func (w *writeback) markLocked() error {
	if w.j.marked == w.done {
		return nil
	}
	w.j.line = append(appendRecord(w.j.line[:0], &record{Done: w.done}), '\n')
	if err := w.writeLineLocked(w.j.line); err != nil {
		return err
	}
	w.j.marked = w.done
	w.cond.Broadcast() // staging files may be recycled
	return nil
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
	if len(w.queue) == 0 && (w.j.err != nil || w.j.size >= journalReset) {
		w.emptyJournalLocked()
		return
	}
	if w.j.err != nil {
		w.rewriteJournalLocked()
		return
	}
	if w.j.size >= max(w.j.compactAt, journalCompact.Load()) && w.compactJournalLocked() == nil {
		return
	}
	if w.markLocked() != nil {
		w.rewriteJournalLocked()
	}
}

// emptyJournalLocked empties the journal when no record waits. It does
// so in place, which loses nothing wherever a crash stops it (the host
// has every record) and gives the space back on a full disk. Needs w.mu.
func (w *writeback) emptyJournalLocked() {
	if err := w.journal.Truncate(0); err != nil {
		w.rewriteJournalLocked()
		return
	}
	w.j = journalState{noAlloc: w.j.noAlloc, mem: w.j.mem, marked: w.done}
	w.roomLocked()
}

// rewriteJournalLocked makes the journal whole again after an append
// failed: it is replaced by one holding only the records that wait
// (replaceJournalLocked). Where that fails (no space for the copy), the
// old journal stays as it is, what it lacks is appended as far as it
// goes, and w.j.err keeps the rest in memory and fails changes and fsync.
// Needs w.mu.
func (w *writeback) rewriteJournalLocked() {
	whole := w.j.err == nil
	err := w.replaceJournalLocked()
	if err == nil || w.rejournalLocked() || !whole {
		return
	}
	w.fs.opts.Logf("cachefs: write-back journal: cannot write it anew (%v) or append its marker (%v); later changes fail until it can", err, w.j.err)
}

// sync makes the journal durable; it fails while records wait in memory.
// The file may be replaced (replaceJournalLocked) while it syncs outside
// w.mu: the new one was synced before it replaced the old, so what the
// old held is durable either way, and a sync that found the old one
// closed syncs the new one.
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

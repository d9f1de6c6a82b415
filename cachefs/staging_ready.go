package cachefs

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Ready staging files. A create in a delegated subtree needs an empty
// staging file, open, for the handle it returns; making and opening one
// is the costliest part of the request (an untar: 19% of the daemon's
// CPU, in ext4's inode allocation and the open). So a goroutine keeps
// readyTarget of them made and open ahead of the creates, from spares or
// new, off the request path: while the kernel waits for one request it
// readies the file for the next. A create takes one if there is one and
// makes its own otherwise.
//
// A ready file is an empty file in data/ that no record names: if the
// daemon stops, the next takes it as a spare (loadStaging).

const readyTarget = 32

// readyFile is an empty staging file and a descriptor open on it for
// reading and writing.
type readyFile struct {
	name string
	f    *os.File
}

// takeReadyLocked returns a ready staging file, if there is one, and
// asks for more once half are taken: the goroutine is woken once per
// readyTarget/2 creates, not per create (a wakeup of the other CPU costs
// tens of microseconds on a VM). Needs w.mu.
func (w *writeback) takeReadyLocked() (readyFile, bool) {
	n := len(w.ready)
	if n <= readyTarget/2 && !w.closed {
		select {
		case w.readyKick <- struct{}{}:
		default: // asked already
		}
	}
	if n == 0 {
		return readyFile{}, false
	}
	r := w.ready[n-1]
	w.ready = w.ready[:n-1]
	return r, true
}

// keepReady readies staging files whenever asked, until the write-back
// closes.
func (w *writeback) keepReady() {
	for range w.readyKick {
		for w.readyOne() {
		}
	}
}

// readyOne readies one staging file; it reports false when there are
// enough, the write-back closed, or a file could not be made (a full
// state directory: creates then make their own and report it).
func (w *writeback) readyOne() bool {
	w.mu.Lock()
	if w.closed || len(w.ready)+w.readying >= readyTarget {
		w.mu.Unlock()
		return false
	}
	name, spare := w.takeSpareLocked()
	w.readying++ // a slot, so that callers at once make no more than readyTarget
	w.mu.Unlock()
	f, err := openPlain(filepath.Join(w.dir, name), unix.O_RDWR|unix.O_CREAT, 0600)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.readying--
	switch {
	case err != nil:
		if spare {
			w.keepSpareLocked(name)
		}
		return false
	case w.closed:
		f.Close()
		return false
	}
	w.ready = append(w.ready, readyFile{name, f})
	return true
}

// closeReadyLocked closes the ready files, which stay as spares for
// the next daemon. Needs w.mu.
func (w *writeback) closeReadyLocked() {
	for _, r := range w.ready {
		r.f.Close()
	}
	w.ready = nil
	close(w.readyKick)
}

package cachefs

import "os"

// RemoveStateDir removes Options.StateDir unless it holds changes still
// to be written back, and reports whether it did; the next daemon on
// the directory then starts without spare staging files. It is for
// after the filesystem stopped serving (its unmount, or a Mount that
// failed): it stops the write-back first.
func (fs *FS) RemoveStateDir() (bool, error) {
	if fs.wb == nil {
		return false, nil
	}
	w := fs.wb
	w.close()
	w.mu.Lock()
	pending := len(w.queue)
	w.mu.Unlock()
	if pending > 0 {
		return false, nil
	}
	err := os.RemoveAll(w.dir)
	if err != nil { // a ready file made as the write-back closed
		err = os.RemoveAll(w.dir)
	}
	return err == nil, err
}

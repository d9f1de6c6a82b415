package cachefs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

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
	err := removeLocal(w.dir)
	if err != nil { // a ready file made as the write-back closed
		err = removeLocal(w.dir)
	}
	return err == nil, err
}

// removeLocal removes dir and what it holds, refusing to go into a
// mount: a connection's mountpoint under the state directory (guest.go)
// that is still mounted leads to the host's files.
func removeLocal(dir string) error {
	var top unix.Stat_t
	if err := unix.Lstat(dir, &top); err != nil {
		return err
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if st.Dev != top.Dev {
			return fmt.Errorf("%s is a mountpoint: not removing the state directory", p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

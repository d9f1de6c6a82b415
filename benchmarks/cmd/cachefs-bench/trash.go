package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Deleted files cost the files made after them on some filesystems: on
// ext4 without a journal (this machine's disk) every inode allocation
// scans past the inodes freed in the last 30 seconds, or 5.5 minutes
// while their inode table block is dirty (and a create next to them
// dirties it). A kernel untar run right after the previous run's 83,731
// entries were deleted measured 56 s natively where one on a quiet disk
// took 8 to 10 s. So a run's output is moved to a trash directory, not
// deleted; the trash is emptied after each system, followed by a sync
// and, unless it was the last, a pause of --settle, so that every
// system starts on a disk with nothing freed in the last 5.5 minutes.

// discard moves dir to the trash (or removes it where it cannot move).
func (r *runner) discard(dir string) {
	trash := filepath.Join(r.cfg.Work, "run", "trash")
	os.MkdirAll(trash, 0o755)
	r.trashed++
	if os.Rename(dir, filepath.Join(trash, fmt.Sprint(r.trashed))) != nil {
		os.RemoveAll(dir)
	}
}

// emptyTrash deletes what was discarded, then lets the disk settle
// if another system follows.
func (r *runner) emptyTrash(more bool) {
	os.RemoveAll(filepath.Join(r.cfg.Work, "run", "trash"))
	if r.cfg.Settle <= 0 || !more {
		return
	}
	if f, err := os.Open(r.cfg.Work); err == nil {
		unix.Syncfs(int(f.Fd()))
		f.Close()
	}
	r.logf("letting the disk settle for %v after deleting files", r.cfg.Settle)
	time.Sleep(r.cfg.Settle)
}

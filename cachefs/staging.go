package cachefs

import (
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Staging files. A file of a delegated subtree whose contents the guest
// holds has a staging file, data/N in the state directory, from its
// create (or first local write) until the host has its contents.
//
// Staging files are recycled, not unlinked: once the host has a file's
// contents its staging file is emptied and kept as a spare (at most
// stagingSpares), and the next create takes a spare before it makes a
// new file. A create-heavy workload (an untar) would otherwise allocate
// and free one inode in the state directory per file it writes; on ext4
// without a journal every allocation scans past the inodes freed in the
// last 30 seconds (5.5 minutes while their table block is dirty), so
// each create costs more the faster files are written back, and the
// host's creates on the same filesystem pay for the guest's frees.
//
// At start, files in data/ that no journaled record names (spares of the
// daemon before, or files a crash left) become spares or are removed.
// A replayed record holds its staging file until every replayed record
// naming it is on the host (replayed counts them): several writes of
// one file may name one staging file, and each sends its contents.

const stagingSpares = 4096

// stageLocked makes a staging file holding data and returns its name.
// Where the state directory lacks space it fails, and leaves no file.
// Needs w.mu.
func (w *writeback) stageLocked(data []byte) (string, error) {
	name, spare := w.takeSpareLocked()
	if spare && len(data) == 0 {
		return name, nil // spares are empty
	}
	p := filepath.Join(w.dir, name)
	if err := writePlain(p, data, 0600); err != nil {
		os.Remove(p)
		return name, err
	}
	return name, nil
}

// newStagingLocked makes an empty staging file and returns its name; if
// it could not be made, opening it fails. Needs w.mu.
func (w *writeback) newStagingLocked() string {
	name, _ := w.stageLocked(nil)
	return name
}

// takeSpareLocked returns a spare staging file, or a new name. Needs
// w.mu.
func (w *writeback) takeSpareLocked() (string, bool) {
	if n := len(w.spare); n > 0 {
		name := w.spare[n-1]
		w.spare = w.spare[:n-1]
		return name, true
	}
	w.nextFile++
	return "data/" + strconv.FormatUint(w.nextFile, 10), false
}

// recyclableLocked reports whether staging files were dropped and may be
// recycled: only while the journal marks every record the host has
// (journal.go), as a replay would send a record's staging file again.
// Needs w.mu.
func (w *writeback) recyclableLocked() bool {
	return len(w.dropped) > 0 && w.j.marked == w.done
}

// recycleDropped recycles the staging files dropped since, outside
// w.mu: emptying a file is a filesystem call that the kernel's requests
// must not wait for.
func (w *writeback) recycleDropped() {
	w.mu.Lock()
	var names []string
	if w.recyclableLocked() {
		names, w.dropped = w.dropped, nil
	}
	w.mu.Unlock()
	if len(names) == 0 {
		return
	}
	var kept []string
	for _, name := range names {
		if w.emptyStaging(name) {
			kept = append(kept, name)
		}
	}
	w.mu.Lock()
	for _, name := range kept {
		w.keepSpareLocked(name)
	}
	w.mu.Unlock()
	w.cond.Broadcast() // writers may wait for staged bytes
}

// keepSpareLocked keeps an empty staging file as a spare, or removes it
// where there are spares enough. Needs w.mu.
func (w *writeback) keepSpareLocked(name string) {
	if len(w.spare) >= stagingSpares {
		os.Remove(filepath.Join(w.dir, name))
		return
	}
	w.spare = append(w.spare, name)
}

// emptyStaging empties a staging file for reuse, or removes it where it
// cannot be emptied, and reports whether it is there to keep.
//
// It truncates through a descriptor it closes at once, not by path: ext4
// marks a file truncated to zero so that its next close starts writing
// its dirty data out (auto_da_alloc, for programs that replace a file by
// truncating it). Truncated by path, the mark stayed for the file's next
// user, and every untarred file's close started its write-out (perf: the
// FUSE release's close in ext4_alloc_da_blocks). This close clears it.
func (w *writeback) emptyStaging(name string) bool {
	p := filepath.Join(w.dir, name)
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
		return true
	}
	os.Remove(p)
	return false
}

// recycleLocked empties a staging file the host has and keeps it as a
// spare (keepSpareLocked). Needs w.mu.
func (w *writeback) recycleLocked(name string) {
	if w.emptyStaging(name) {
		w.keepSpareLocked(name)
	}
}

// unrefReplayedLocked lets go of a replayed record's staging file once
// no other replayed record needs it. Needs w.mu.
func (w *writeback) unrefReplayedLocked(name string) {
	if w.replayed[name]--; w.replayed[name] <= 0 {
		delete(w.replayed, name)
		w.recycleLocked(name)
	}
}

// loadStaging counts the staging files the replayed records name and
// takes every other file in data/ as a spare (or removes it); new names
// come after every name in data/.
func (w *writeback) loadStaging(replayed []*record) error {
	w.replayed = map[string]int{}
	for _, r := range replayed {
		if r.Staging != "" {
			w.replayed[r.Staging]++
		}
	}
	ents, err := os.ReadDir(filepath.Join(w.dir, "data"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := "data/" + e.Name()
		if n, err := strconv.ParseUint(e.Name(), 10, 64); err == nil {
			w.nextFile = max(w.nextFile, n)
		}
		if w.replayed[name] == 0 {
			w.recycleLocked(name)
		}
	}
	return nil
}

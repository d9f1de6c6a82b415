package overlay

import "golang.org/x/sys/unix"

// Quiet directories. IN_MODIFY comes at the end of every write(2), and
// the kernel builds each one (merging it into the same event left
// unread) in the writer's time: about 1 us a write here, most of what
// the engine added to a dd of 1 KiB writes (docs/overlay.md, dd). So a
// directory's watch loses IN_MODIFY at the first one it raises (the
// directory goes quiet) and gets it back when the directory is next
// scanned: at the start of every pass (wake), which then rescans it,
// and when a pass scans it anyway (watcher.add).
//
// Why nothing is missed. A write sets the file's mtime as it starts,
// and the engine reads a file's data only after its scan compared the
// times: a write that ended before the read is in the data sent, one
// that started after the scan gives the next scan other times. What is
// left is a write in progress during the read; with IN_MODIFY on, its
// end raises the event that sends the file again. Reads happen only
// with IN_MODIFY on: every directory a pass scans is watched again
// before its entries are read, and events, which quiet directories,
// are read only between passes and by the pass's settling, which wakes
// every quiet directory before it returns. The directory must then stay
// awake until such a write ends. So the engine notes, for each file it
// read, whether it was open for writing as it was read (a read lease refused,
// hasWriter: a file nobody had open for writing had no write in
// progress), and a directory holding a file so noted does not go quiet
// until a pass reads that file again with no writer, or finds nobody
// writing it after it was closed (reprobe: every write in progress at
// the read has ended by then, with the directory awake); a rename takes
// the mark along and wakes the directory it lands in. Those files'
// records get no ctime too, so that the first pass after a restart
// (which judges data by ctime) sends them again if the daemon stopped
// before their write's event was seen. Files written while their
// directory was quiet have times the waking rescan finds changed, and
// the files named by the events were marked modified when they came.
//
// So quiet pays where it matters, a burst of writes between two passes
// (a dd, an untar's files, a build's outputs), and a file kept open
// for writing across passes (a log) raises its events as before.
//
// While directories are quiet the engine gathers changes for MaxGather,
// not until they pause (their writers raise no events to pause), and a
// pass that leaves work (a quiet or dirty directory) is followed by
// another within MaxGather: a file written for a long time is sent about
// once a MaxGather, as with IN_MODIFY on.

// quietMask is the mask of a quiet directory's watch.
const quietMask = watchMask &^ unix.IN_MODIFY

// maxQuiet bounds the quiet directories (each holds a descriptor).
const maxQuiet = 64

// quiet takes IN_MODIFY from d's watch; its descriptor is kept, to give
// it back through.
func (w *watcher) quiet(d *wdir) {
	if _, ok := w.quiets[d]; ok || len(w.quiets) >= maxQuiet || len(w.written[d]) > 0 {
		return
	}
	rel, ok := d.path(w.root)
	if !ok {
		return
	}
	fd, err := openDir(w.upper, rel)
	if err != nil {
		return
	}
	wd, err := unix.InotifyAddWatch(w.fd, fdPath(fd, ""), quietMask)
	switch {
	case err != nil:
		unix.Close(fd)
	case int32(wd) != d.wd: // another directory is at d's path now
		w.undo(fd, int32(wd))
		unix.Close(fd)
	default:
		w.quiets[d] = fd
		w.quieted++
	}
}

// undo gives back its mask to the watch wd that a mask change through fd
// reached by mistake (another directory is at the path now, or the
// watch meant went), or removes it if the change made it.
func (w *watcher) undo(fd int, wd int32) {
	if d := w.byWd[wd]; d == nil {
		unix.InotifyRmWatch(w.fd, uint32(wd))
	} else if _, ok := w.quiets[d]; !ok {
		unix.InotifyAddWatch(w.fd, fdPath(fd, ""), watchMask)
	}
}

// wake gives every quiet directory its IN_MODIFY back.
func (w *watcher) wake() {
	for d := range w.quiets {
		w.unquiet(d, true)
	}
}

// unquiet ends d's quiet, and marks it dirty; restore: give its watch
// IN_MODIFY back (false: the caller just did).
func (w *watcher) unquiet(d *wdir, restore bool) {
	fd, ok := w.quiets[d]
	if !ok {
		return
	}
	delete(w.quiets, d)
	if restore {
		if wd, err := unix.InotifyAddWatch(w.fd, fdPath(fd, ""), watchMask); err == nil && int32(wd) != d.wd {
			w.undo(fd, int32(wd)) // d's watch went: its IN_IGNORED is queued
		}
	}
	unix.Close(fd)
	w.dirty[d] = true
}

// readFile notes that the file at rel was read, and whether it was open
// for writing then.
func (w *watcher) readFile(rel string, written bool) {
	dir, name := splitPath(rel)
	d := w.find(dir)
	if d == nil {
		return
	}
	if !written {
		delete(w.written[d], name)
		return
	}
	w.markWritten(d, name)
}

func (w *watcher) markWritten(d *wdir, name string) {
	if w.written[d] == nil {
		w.written[d] = map[string]bool{}
	}
	w.written[d][name] = true
}

// writtenEvent keeps the marks of files read while open for writing
// with their files: one renamed carries its mark to its new directory,
// which wakes (a write in progress there must raise its event); one
// closed after writing is asked again by the next pass (reprobe).
func (w *watcher) writtenEvent(d *wdir, mask, cookie uint32, name string) {
	switch {
	case mask&unix.IN_ISDIR != 0 || name == "":
	case mask&unix.IN_MOVED_FROM != 0 && w.written[d][name]:
		delete(w.written[d], name)
		w.movedWritten[cookie] = true
	case mask&unix.IN_MOVED_TO != 0 && w.movedWritten[cookie]:
		delete(w.movedWritten, cookie)
		w.unquiet(d, true)
		w.markWritten(d, name)
	case mask&unix.IN_CLOSE_WRITE != 0 && w.written[d][name]:
		w.closed[d] = append(w.closed[d], name)
	}
}

// reprobe drops the marks of the files closed after writing that nobody
// has open for writing now: every write in progress when they were read
// has ended (a write holds its file open), while their directory was
// awake, so its event came.
func (w *watcher) reprobe() {
	for d, names := range w.closed {
		rel, ok := d.path(w.root)
		for _, name := range names {
			if !ok || !w.written[d][name] || !stillWritten(w.upper, child(rel, name)) {
				delete(w.written[d], name)
			}
		}
	}
	clear(w.closed)
	clear(w.movedWritten)
}

// stillWritten reports whether the regular file at upper path rel is
// open for writing.
func stillWritten(upper, rel string) bool {
	dfd, name, err := openParent(upper, rel)
	if err != nil {
		return false
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	unix.Close(dfd)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	return hasWriter(fd)
}

// pending reports whether directories are quiet or dirty.
func (w *watcher) pending() bool { return len(w.quiets) > 0 || len(w.dirty) > 0 }

// fileRead is a file whose data a pass read.
type fileRead struct {
	path    string
	written bool // open for writing as it was read
}

// noteReads notes the files a pass read; a record of one read while
// open for writing loses its ctime.
func (e *Engine) noteReads(reads []fileRead) {
	for _, r := range reads {
		if e.w != nil {
			e.w.readFile(r.path, r.written)
		}
		if n := e.st.find(r.path); r.written && n != nil && n.rec.Kind == kFile && n.rec.Ctime != 0 {
			rec := n.rec
			rec.Ctime = 0
			e.st.set(r.path, rec)
		}
	}
}

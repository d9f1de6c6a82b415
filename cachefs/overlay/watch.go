package overlay

import (
	"encoding/binary"
	"strings"

	"golang.org/x/sys/unix"
)

// The watcher follows the upper directory with inotify: a watch on each
// directory, which scans add as they find directories. Overlayfs makes
// its changes to the upper directory through the VFS, so each raises
// the events of a local change. An event marks its directory dirty; a
// pass rescans the dirty directories. Directories are known by a tree
// of watches that moves follow (a MOVED_FROM and its MOVED_TO are
// queued together), so a dirty directory's path is its path now. A
// queue overflow asks for a full rescan.
//
// The watcher is owned by the engine's goroutine.

const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF |
	unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// wdir is a watched directory.
type wdir struct {
	wd       int32
	parent   *wdir
	name     string
	children map[string]*wdir
}

type watcher struct {
	fd    int
	upper string
	root  *wdir
	byWd  map[int32]*wdir
	moves map[uint32]*wdir // directories moved out of a watched directory, by cookie
	dirty map[*wdir]bool
	// modified: names written to (IN_MODIFY) since the last take, per
	// directory: a write that left size and mtime as they were.
	modified map[*wdir]map[string]bool
	full     bool   // the queue overflowed: everything must be rescanned
	moved    uint64 // moves seen (IN_MOVED_FROM, IN_MOVED_TO), in all
	buf      []byte
	quiets   map[*wdir]int // directories whose watch has no IN_MODIFY (quiet.go): their fds
	quieted  uint64        // directories made quiet, in all
	// written: per directory, files read by a pass while open for
	// writing, which keep it from going quiet (quiet.go); closed: those
	// of them closed after writing since, to ask again; movedWritten:
	// cookies of their renames
	written      map[*wdir]map[string]bool
	closed       map[*wdir][]string
	movedWritten map[uint32]bool
}

func newWatcher(upper string) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &watcher{fd: fd, upper: upper, byWd: map[int32]*wdir{}, moves: map[uint32]*wdir{},
		dirty: map[*wdir]bool{}, modified: map[*wdir]map[string]bool{}, quiets: map[*wdir]int{}, written: map[*wdir]map[string]bool{},
		closed: map[*wdir][]string{}, movedWritten: map[uint32]bool{}, buf: make([]byte, 64<<10)}
	root, err := openDir(upper, "")
	if err == nil {
		err = w.add(root, "")
		unix.Close(root)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return w, nil
}

func (w *watcher) close() {
	for _, fd := range w.quiets {
		unix.Close(fd)
	}
	unix.Close(w.fd)
}

// add watches the directory rel, open as dfd, placing it in the tree
// there (it may have been watched elsewhere before a move).
func (w *watcher) add(dfd int, rel string) error {
	wd, err := unix.InotifyAddWatch(w.fd, fdPath(dfd, ""), watchMask)
	if err != nil {
		return err
	}
	d := w.byWd[int32(wd)]
	if d == nil {
		d = &wdir{wd: int32(wd)}
		w.byWd[d.wd] = d
	}
	w.unquiet(d, false) // the watch has IN_MODIFY again
	if rel == "" {
		w.root = d
		return nil
	}
	dir, name := splitPath(rel)
	if p := w.find(dir); p != nil {
		w.place(d, p, name)
	}
	return nil
}

// find returns the watched directory at rel, or nil.
func (w *watcher) find(rel string) *wdir {
	d := w.root
	if rel == "" || d == nil {
		return d
	}
	for _, c := range strings.Split(rel, "/") {
		if d = d.children[c]; d == nil {
			return nil
		}
	}
	return d
}

// place puts d in the tree as name in p.
func (w *watcher) place(d, p *wdir, name string) {
	w.detach(d)
	if p.children == nil {
		p.children = map[string]*wdir{}
	}
	if old := p.children[name]; old != nil && old != d {
		w.detach(old)
	}
	d.parent, d.name = p, name
	p.children[name] = d
}

func (w *watcher) detach(d *wdir) {
	if d.parent != nil && d.parent.children[d.name] == d {
		delete(d.parent.children, d.name)
	}
	d.parent = nil
}

// path returns d's path, and false if d is no longer in the tree.
func (d *wdir) path(root *wdir) (string, bool) {
	var parts []string
	for ; d != root; d = d.parent {
		if d == nil {
			return "", false
		}
		parts = append(parts, d.name)
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "/"), true
}

// read takes every event queued now, without blocking, and reports
// whether there were any.
func (w *watcher) read() bool {
	any := false
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			return any
		}
		any = true
		w.parse(w.buf[:n])
	}
}

// parse handles a buffer of events.
func (w *watcher) parse(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		cookie := binary.NativeEndian.Uint32(b[8:])
		l := int(binary.NativeEndian.Uint32(b[12:]))
		end := unix.SizeofInotifyEvent + l
		if end > len(b) {
			return
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:end]), "\x00")
		w.event(wd, mask, cookie, name)
		b = b[end:]
	}
}

// event handles one event.
func (w *watcher) event(wd int32, mask, cookie uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.full = true
		return
	}
	d := w.byWd[wd]
	if d == nil {
		return
	}
	if mask&(unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0 {
		w.moved++
	}
	switch {
	case mask&unix.IN_IGNORED != 0:
		w.forget(d)
		return
	case mask&(unix.IN_MOVED_FROM|unix.IN_ISDIR) == unix.IN_MOVED_FROM|unix.IN_ISDIR:
		if c := d.children[name]; c != nil {
			w.moves[cookie] = c
		}
	case mask&(unix.IN_MOVED_TO|unix.IN_ISDIR) == unix.IN_MOVED_TO|unix.IN_ISDIR:
		if c := w.moves[cookie]; c != nil {
			delete(w.moves, cookie)
			w.place(c, d, name)
		}
	}
	w.writtenEvent(d, mask, cookie, name)
	if mask&unix.IN_MODIFY != 0 && name != "" {
		w.modify(d, name)
		w.quiet(d)
	}
	if name == "" && d.parent != nil {
		w.dirty[d.parent] = true // the directory's own attributes
	}
	w.dirty[d] = true
}

// modify notes that name in d was written to.
func (w *watcher) modify(d *wdir, name string) {
	if w.modified[d] == nil {
		w.modified[d] = map[string]bool{}
	}
	w.modified[d][name] = true
}

// forget drops a directory whose watch is gone.
func (w *watcher) forget(d *wdir) {
	if fd, ok := w.quiets[d]; ok {
		unix.Close(fd)
		delete(w.quiets, d)
	}
	delete(w.written, d)
	delete(w.closed, d)
	w.detach(d)
	delete(w.byWd, d.wd)
	delete(w.dirty, d)
	delete(w.modified, d)
	for c, m := range w.moves {
		if m == d {
			delete(w.moves, c)
		}
	}
}

// changes are what the watcher saw since the last take.
type changes struct {
	dirs     []string        // directories to rescan
	modified map[string]bool // paths of files written to
	full     bool            // everything must be rescanned
}

// take returns the changes seen and clears them.
func (w *watcher) take() changes {
	c := changes{modified: map[string]bool{}, full: w.full}
	for d := range w.dirty {
		if p, ok := d.path(w.root); ok {
			c.dirs = append(c.dirs, p)
		}
	}
	for d, names := range w.modified {
		if p, ok := d.path(w.root); ok {
			for n := range names {
				c.modified[child(p, n)] = true
			}
		}
	}
	w.dirty, w.modified, w.full = map[*wdir]bool{}, map[*wdir]map[string]bool{}, false
	return c
}

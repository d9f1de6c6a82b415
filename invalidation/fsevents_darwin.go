package invalidation

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// open chooses FSEvents, the only mechanism on macOS.
func (h *Hub) open(o HubOptions) error {
	switch h.kind {
	case Auto, FSEvents:
	default:
		return fmt.Errorf("watcher %v: Linux only (macOS has fsevents)", h.kind)
	}
	if err := loadFSEvents(); err != nil {
		return err
	}
	h.kind, h.back = FSEvents, fsBackend{h.c}
	return nil
}

// fsBackend gives each watcher an FSEvents stream of its own.
type fsBackend struct{ c *counters }

func (b fsBackend) watcher(emit func(Change)) (TreeWatcher, error) {
	return &fsWatcher{emit: emit, c: b.c, roots: map[dirID]*fsRoot{}}, nil
}

func (fsBackend) close() error { return nil }

// fsWatcher watches its trees with one FSEvents stream over their
// paths, made again whenever the set of roots changes (an event of the
// old stream still in flight is delivered before it is released).
// Events come per file (kFSEventStreamCreateFlagFileEvents) on a
// dispatch queue of the stream's, carrying the item's path and the
// flags accumulated since its last event; a directory is named by the
// (dev, ino) its path has when the event is read.
type fsWatcher struct {
	emit func(Change) // immutable
	c    *counters    // immutable

	mu     sync.Mutex // protects the following
	roots  map[dirID]*fsRoot
	stream *fsStream
	closed bool
	cookie uint32
}

var _ TreeWatcher = (*fsWatcher)(nil)

type fsRoot struct {
	id   dirID
	path string // as F_GETPATH gave it when added
	refs int
}

func (w *fsWatcher) AddTree(dirfd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(dirfd, &st); err != nil {
		return err
	}
	p, err := fdPath(dirfd)
	if err != nil {
		return err
	}
	id := dirID{uint64(st.Dev), st.Ino}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return os.ErrClosed
	}
	if r := w.roots[id]; r != nil {
		r.refs++
		return nil
	}
	w.roots[id] = &fsRoot{id: id, path: p, refs: 1}
	w.c.trees.Add(1)
	return w.restartLocked()
}

func (w *fsWatcher) RemoveTree(dev, ino uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.roots[dirID{dev, ino}]
	if r == nil || w.closed {
		return
	}
	if r.refs--; r.refs > 0 {
		return
	}
	delete(w.roots, r.id)
	w.c.trees.Add(-1)
	w.restartLocked()
}

func (w *fsWatcher) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	w.c.trees.Add(-int64(len(w.roots)))
	w.roots = nil
	return w.restartLocked()
}

// restartLocked replaces the stream by one over the current roots. The
// new stream starts at the event id current before the old one stopped,
// so that nothing between them goes unseen (an event may come twice).
func (w *fsWatcher) restartLocked() error {
	since := uint64(fsSinceNow)
	if w.stream != nil {
		since = fsEventsGetCurrentEventID()
		w.stream.stop()
		w.stream = nil
	}
	if len(w.roots) == 0 {
		return nil
	}
	paths := make([]string, 0, len(w.roots))
	for _, r := range w.roots {
		paths = append(paths, r.path)
	}
	s, err := newFSStream(paths, since, w.events)
	if err != nil {
		for _, r := range w.roots { // nothing is dropped silently
			w.emit(Change{Op: Overflow, RootDev: r.id.dev, RootIno: r.id.ino})
			w.c.overflows.Add(1)
		}
		return err
	}
	w.stream = s
	return nil
}

// fdPath returns the path of an fd (fcntl F_GETPATH).
func fdPath(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	_, _, e := unix.Syscall(unix.SYS_FCNTL, uintptr(fd), unix.F_GETPATH, uintptr(unsafe.Pointer(&buf[0])))
	if e != 0 {
		return "", e
	}
	for i, b := range buf {
		if b == 0 {
			return string(buf[:i]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

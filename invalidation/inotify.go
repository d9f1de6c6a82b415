//go:build linux

package invalidation

import (
	"encoding/binary"
	"errors"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// watchMask is what the host watcher listens for on each directory.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// Watcher watches directory trees with inotify and emits Changes. It
// keeps one fd per watched root, none per directory: a directory is
// found again through its root and its path relative to it.
type Watcher struct {
	emit func(Change) // immutable: called from the reader goroutine
	f    *os.File     // immutable: the inotify fd, closed by Close
	fd   int          // immutable: f's fd (f.Fd would make reads blocking)
	c    *counters    // immutable; shared by a Hub's watchers

	mu    sync.Mutex // protects the following
	roots map[dirID]*root
	wds   map[int32]*watch
}

var _ TreeWatcher = (*Watcher)(nil)

type root struct {
	id   dirID
	fd   int // O_PATH fd of the root directory
	refs int
}

type watch struct {
	root *root
	rel  string // path below the root, "" for the root itself
	id   dirID
}

// NewWatcher starts a watcher that calls emit for each change.
func NewWatcher(emit func(Change)) (*Watcher, error) {
	return newWatcher(emit, &counters{})
}

func newWatcher(emit func(Change), c *counters) (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &Watcher{emit: emit, f: os.NewFile(uintptr(fd), "inotify"), fd: fd, c: c,
		roots: map[dirID]*root{}, wds: map[int32]*watch{}}
	go w.read()
	return w, nil
}

// Close stops the watcher and closes its fds.
func (w *Watcher) Close() error {
	err := w.f.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.roots {
		unix.Close(r.fd)
	}
	w.c.trees.Add(-int64(len(w.roots)))
	w.roots = map[dirID]*root{}
	return err
}

// AddTree watches the directory dirfd (any fd of it; it is not kept) and
// every directory under it. Watching a root twice counts references.
func (w *Watcher) AddTree(dirfd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(dirfd, &st); err != nil {
		return err
	}
	id := dirID{st.Dev, st.Ino}
	w.mu.Lock()
	if r := w.roots[id]; r != nil {
		r.refs++
		w.mu.Unlock()
		return nil
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(dirfd), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		w.mu.Unlock()
		return err
	}
	r := &root{id: id, fd: fd, refs: 1}
	w.roots[id] = r
	w.c.trees.Add(1)
	w.mu.Unlock()
	return w.addDir(r, "")
}

// RemoveTree drops one reference to a watched root; the last one stops
// watching its directories.
func (w *Watcher) RemoveTree(dev, ino uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.roots[dirID{dev, ino}]
	if r == nil {
		return
	}
	if r.refs--; r.refs > 0 {
		return
	}
	for wd, wt := range w.wds {
		if wt.root == r {
			unix.InotifyRmWatch(w.fd, uint32(wd))
			delete(w.wds, wd)
		}
	}
	delete(w.roots, r.id)
	w.c.trees.Add(-1)
	unix.Close(r.fd)
}

// Watches returns the number of directories watched.
func (w *Watcher) Watches() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.wds)
}

// addDir watches the directory rel under r and, recursively, those under
// it. A directory that cannot be watched is reported as an overflow of
// its root: the guest must not trust what it caches there.
func (w *Watcher) addDir(r *root, rel string) error {
	p := "/proc/self/fd/" + strconv.Itoa(r.fd)
	mask := uint32(watchMask)
	if rel != "" {
		p += "/" + rel
	} else {
		mask &^= unix.IN_DONT_FOLLOW // the root is named by a /proc magic link
	}
	wd, err := unix.InotifyAddWatch(w.fd, p, mask)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil // gone again already
		}
		w.overflow(r)
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return nil
	}
	w.mu.Lock()
	w.wds[int32(wd)] = &watch{root: r, rel: rel, id: dirID{st.Dev, st.Ino}}
	w.mu.Unlock()
	for _, sub := range subdirs(p) {
		w.addDir(r, path.Join(rel, sub))
	}
	return nil
}

// subdirs lists the names of the directories in the directory at p.
func subdirs(p string) []string {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	ents, _ := f.ReadDir(-1)
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

func (w *Watcher) overflow(r *root) {
	w.c.overflows.Add(1)
	w.emit(Change{Op: Overflow, DirDev: r.id.dev, DirIno: r.id.ino, RootDev: r.id.dev, RootIno: r.id.ino})
}

func (w *Watcher) read() {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		w.parse(buf[:n])
	}
}

// parse handles a buffer of inotify_event records.
func (w *Watcher) parse(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.LittleEndian.Uint32(b))
		mask := binary.LittleEndian.Uint32(b[4:])
		cookie := binary.LittleEndian.Uint32(b[8:])
		nlen := int(binary.LittleEndian.Uint32(b[12:]))
		if unix.SizeofInotifyEvent+nlen > len(b) {
			return
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+nlen]), "\x00")
		b = b[unix.SizeofInotifyEvent+nlen:]
		w.c.events.Add(1)
		w.event(wd, mask, cookie, name)
	}
}

func (w *Watcher) event(wd int32, mask, cookie uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.mu.Lock()
		roots := make([]*root, 0, len(w.roots))
		for _, r := range w.roots {
			roots = append(roots, r)
		}
		w.mu.Unlock()
		for _, r := range roots {
			w.overflow(r)
		}
		return
	}
	w.mu.Lock()
	wt := w.wds[wd]
	if mask&unix.IN_IGNORED != 0 {
		delete(w.wds, wd)
	}
	w.mu.Unlock()
	if wt == nil || mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF) != 0 {
		return
	}
	c := Change{DirDev: wt.id.dev, DirIno: wt.id.ino, Name: name, IsDir: mask&unix.IN_ISDIR != 0,
		Cookie: cookie, RootDev: wt.root.id.dev, RootIno: wt.root.id.ino}
	c.Op = opOf(mask)
	if c.Op == 0 {
		return
	}
	if c.IsDir && (c.Op == Create || c.Op == MoveTo) {
		w.addDir(wt.root, path.Join(wt.rel, name))
	}
	if c.IsDir && c.Op == MoveFrom {
		w.forgetDir(wt, name)
	}
	w.emit(c)
}

// forgetDir drops the watches under a directory moved away: they would
// carry stale paths. If it moved within a tree, MoveTo watches it anew.
func (w *Watcher) forgetDir(parent *watch, name string) {
	prefix := path.Join(parent.rel, name)
	w.mu.Lock()
	defer w.mu.Unlock()
	for wd, wt := range w.wds {
		if wt.root == parent.root && (wt.rel == prefix || strings.HasPrefix(wt.rel, prefix+"/")) {
			unix.InotifyRmWatch(w.fd, uint32(wd))
			delete(w.wds, wd)
		}
	}
}

func opOf(mask uint32) Op {
	switch {
	case mask&unix.IN_CREATE != 0:
		return Create
	case mask&unix.IN_DELETE != 0:
		return Delete
	case mask&unix.IN_MOVED_FROM != 0:
		return MoveFrom
	case mask&unix.IN_MOVED_TO != 0:
		return MoveTo
	case mask&unix.IN_MODIFY != 0:
		return Modify
	case mask&unix.IN_ATTRIB != 0:
		return Attrib
	}
	return 0
}

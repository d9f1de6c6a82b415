//go:build linux

package invalidation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sys/unix"
)

// fanInit and fanMask are how the group is opened and what each
// filesystem mark asks for. FAN_RENAME reports both ends of a rename in
// one event (FAN_MOVED_FROM/TO would come apart, without a cookie);
// FAN_EVENT_ON_CHILD makes a filesystem mark report events on files with
// their directory and name; FAN_CLOSE_WRITE covers writes through mmap.
// DELETE_SELF and MOVE_SELF are not asked for: the directory's own
// entry event says the same.
const (
	fanInit = unix.FAN_CLASS_NOTIF | unix.FAN_REPORT_DFID_NAME | unix.FAN_CLOEXEC | unix.FAN_NONBLOCK
	fanMask = unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_RENAME | unix.FAN_MODIFY | unix.FAN_ATTRIB |
		unix.FAN_CLOSE_WRITE | unix.FAN_ONDIR | unix.FAN_EVENT_ON_CHILD
)

// fanIgnore is what the ignore mark of an unwatched directory
// (HubOptions.Unwatched) ignores: the events of its entries that are
// not directories (without FAN_ONDIR, FAN_MARK_IGNORE leaves the
// events of directories alone), and not renames, which name another
// directory too. So a directory made in an unwatched tree is reported,
// and gets an ignore mark of its own (unwatchedDir): the upper
// directories of a guest's overlays, in `cachefsd local`, are made after
// the group marked the state directory, and an untar into one makes
// thousands more.
const fanIgnore = unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_MODIFY | unix.FAN_ATTRIB |
	unix.FAN_CLOSE_WRITE | unix.FAN_EVENT_ON_CHILD

// fanDirCache bounds the directory handle → path resolutions kept.
const fanDirCache = 8192

// fanGroup is one fanotify group shared by a Hub's watchers. It marks a
// whole filesystem while a tree on it is watched, resolves the directory
// handle of each event to a path (cached), and hands the event to the
// watchers with a tree above that path.
type fanGroup struct {
	c         *counters // immutable
	pid       int32     // immutable: our pid, whose own FAN_CLOSE_WRITE means nothing
	unwatched []string  // immutable: HubOptions.Unwatched, symlinks resolved

	mu       sync.Mutex   // protects the following
	f        *os.File     // the group's fd (non-blocking); restart replaces it
	fd       int          // f's fd
	mounts   map[fsid]int // O_RDONLY directory fd per filesystem: mount_fd; closed by close
	marks    map[fsid]int // roots per marked filesystem
	roots    map[dirID]*fanRoot
	watchers map[*fanWatcher]bool
	closed   bool
	done     chan struct{} // closed when the reader returns; nil if never started

	// The reader goroutine owns the following.
	dirs        *simplelru.LRU[string, fanDir]
	cookie      uint32
	lastRestart time.Time
}

// fanRoot is a watched root, shared by the watchers watching it.
type fanRoot struct {
	id   dirID
	fsid fsid
	fd   int    // O_PATH fd of the root
	path string // as /proc shows it; refreshed when a directory above it moves
	refs int    // over all watchers
}

// fanDir is a resolved directory handle.
type fanDir struct {
	path string
	id   dirID
}

// newFanGroup opens a group and checks that mountFD's filesystem can be
// marked; it marks nothing yet.
func newFanGroup(mountFD int, unwatched []string, c *counters) (*fanGroup, error) {
	fd, err := unix.FanotifyInit(fanInit, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_LARGEFILE)
	if err != nil {
		return nil, fmt.Errorf("fanotify_init: %w", err)
	}
	g := &fanGroup{c: c, pid: int32(os.Getpid()), unwatched: realPaths(unwatched), f: os.NewFile(uintptr(fd), "fanotify"), fd: fd,
		mounts: map[fsid]int{}, marks: map[fsid]int{}, roots: map[dirID]*fanRoot{},
		watchers: map[*fanWatcher]bool{}}
	g.dirs, _ = simplelru.NewLRU[string, fanDir](fanDirCache, nil)
	if err := g.probe(mountFD); err != nil {
		g.f.Close()
		return nil, err
	}
	return g, nil
}

// probe marks and unmarks mountFD's filesystem, and keeps a duplicate
// of mountFD as that filesystem's mount_fd.
func (g *fanGroup) probe(mountFD int) error {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(mountFD, &sfs); err != nil {
		return err
	}
	p := procPath(mountFD)
	if err := unix.FanotifyMark(g.fd, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, fanMask, unix.AT_FDCWD, p); err != nil {
		return fmt.Errorf("fanotify_mark: %w", err)
	}
	unix.FanotifyMark(g.fd, unix.FAN_MARK_REMOVE|unix.FAN_MARK_FILESYSTEM, fanMask, unix.AT_FDCWD, p)
	dup, err := unix.FcntlInt(uintptr(mountFD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	g.mounts[fsid(sfs.Fsid.Val)] = dup
	return nil
}

func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// start starts the reader goroutine.
func (g *fanGroup) start() {
	g.mu.Lock()
	g.done = make(chan struct{})
	g.mu.Unlock()
	go g.read()
}

// close stops the reader, then closes every fd of the group.
func (g *fanGroup) close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	err := g.f.Close()
	done := g.done
	g.mu.Unlock()
	if done != nil {
		<-done
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.roots {
		unix.Close(r.fd)
	}
	for _, fd := range g.mounts {
		unix.Close(fd)
	}
	for w := range g.watchers {
		g.c.trees.Add(-int64(len(w.roots)))
		w.roots = map[dirID]int{}
	}
	g.roots, g.mounts, g.watchers = map[dirID]*fanRoot{}, map[fsid]int{}, map[*fanWatcher]bool{}
	return err
}

// errNoMark wraps a failure to mark a tree's filesystem: the watcher
// falls back to inotify for that tree.
var errNoMark = errors.New("fanotify cannot mark this filesystem")

// addRoot takes a reference on the root dirfd, marking its filesystem
// if it is the first root there.
func (g *fanGroup) addRoot(dirfd int) (dirID, error) {
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if err := unix.Fstat(dirfd, &st); err != nil {
		return dirID{}, err
	}
	if err := unix.Fstatfs(dirfd, &sfs); err != nil {
		return dirID{}, err
	}
	id, fs := dirID{st.Dev, st.Ino}, fsid(sfs.Fsid.Val)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return id, os.ErrClosed
	}
	if r := g.roots[id]; r != nil {
		r.refs++
		return id, nil
	}
	fd, err := unix.Open(procPath(dirfd), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return id, err
	}
	r := &fanRoot{id: id, fsid: fs, fd: fd, refs: 1}
	if r.path, err = readProcLink(fd); err == nil {
		err = g.markLocked(fs, fd)
	}
	if err == nil {
		if err = g.checkResolvableLocked(r); err != nil {
			g.unmarkLocked(fs)
		}
	}
	if err != nil {
		unix.Close(fd)
		return id, err
	}
	g.roots[id] = r
	return id, nil
}

// markLocked counts a root on fs, marking fs for the first; rootFD
// gives the filesystem its mount_fd if it has none yet.
func (g *fanGroup) markLocked(fs fsid, rootFD int) error {
	if g.marks[fs] > 0 {
		g.marks[fs]++
		return nil
	}
	if _, ok := g.mounts[fs]; !ok {
		mfd, err := unix.Open(procPath(rootFD), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		g.mounts[fs] = mfd
	}
	err := unix.FanotifyMark(g.fd, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, fanMask, unix.AT_FDCWD, procPath(g.mounts[fs]))
	if err != nil {
		return fmt.Errorf("%w: %w", errNoMark, err)
	}
	g.marks[fs] = 1
	ignoreUnwatched(g.fd, g.unwatched)
	return nil
}

// realPaths returns paths with their symlinks resolved, where they
// resolve.
func realPaths(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p
		if real, err := filepath.EvalSymlinks(p); err == nil {
			out[i] = real
		}
	}
	return out
}

// unwatchedDir gives directory p an ignore mark, with everything under
// it, if it lies in an unwatched tree: it was made or moved there after
// the tree was marked.
func (g *fanGroup) unwatchedDir(p string) {
	for _, tree := range g.unwatched {
		if within(p, tree) {
			ignoreUnwatched(g.fd, []string{p})
			g.c.unwatchedDirs.Add(1)
			return
		}
	}
}

// ignoreUnwatched gives each directory now in the trees (real paths) an
// ignore mark in group fd (again: marks add up). A directory it cannot
// mark (gone, or a kernel before 6.0 without FAN_MARK_IGNORE) is
// reported as any other.
func ignoreUnwatched(fd int, trees []string) {
	const flags = unix.FAN_MARK_ADD | unix.FAN_MARK_IGNORE | unix.FAN_MARK_IGNORED_SURV_MODIFY | unix.FAN_MARK_DONT_FOLLOW
	for _, tree := range trees {
		filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				unix.FanotifyMark(fd, flags, fanIgnore, unix.AT_FDCWD, p)
			}
			return nil
		})
	}
}

// removeRoot drops a reference to a root; the last one on a filesystem
// removes its mark.
func (g *fanGroup) removeRoot(id dirID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.roots[id]
	if r == nil || g.closed {
		return
	}
	if r.refs--; r.refs > 0 {
		return
	}
	delete(g.roots, id)
	unix.Close(r.fd)
	g.unmarkLocked(r.fsid)
}

// unmarkLocked uncounts a root on fs, unmarking fs after the last.
func (g *fanGroup) unmarkLocked(fs fsid) {
	if g.marks[fs]--; g.marks[fs] > 0 {
		return
	}
	delete(g.marks, fs)
	unix.FanotifyMark(g.fd, unix.FAN_MARK_REMOVE|unix.FAN_MARK_FILESYSTEM, fanMask, unix.AT_FDCWD, procPath(g.mounts[fs]))
}

// checkResolvableLocked checks that the root's own handle resolves,
// through its filesystem's mount_fd, to the path the root has: events
// are matched by such paths. A root reached through another mount of
// the filesystem (a bind mount) would never match.
func (g *fanGroup) checkResolvableLocked(r *fanRoot) error {
	h, _, err := unix.NameToHandleAt(r.fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("%w: %w", errNoMark, err)
	}
	fd, err := unix.OpenByHandleAt(g.mounts[r.fsid], h, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return fmt.Errorf("%w: %w", errNoMark, err)
	}
	defer unix.Close(fd)
	if p, err := readProcLink(fd); err != nil || p != r.path {
		return fmt.Errorf("%w: %s resolves to %q by handle", errNoMark, r.path, p)
	}
	return nil
}

// readProcLink returns the path of fd as /proc shows it.
func readProcLink(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlink(procPath(fd), buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func (g *fanGroup) read() {
	defer close(g.done)
	buf := make([]byte, 64<<10)
	for {
		g.mu.Lock()
		f := g.f
		g.mu.Unlock()
		n, err := f.Read(buf)
		if err != nil {
			if !g.restart(f) {
				return
			}
			continue
		}
		g.parse(buf[:n])
	}
}

// restart replaces a group whose fd failed (unless it was closed) by a
// new one with the same marks, at most once a second, and overflows
// every watched root: events may have been lost in between. It reports
// whether reading goes on; if no group can be opened, the watchers get
// no more events.
func (g *fanGroup) restart(failed *os.File) bool {
	if g.isClosed() {
		return false
	}
	time.Sleep(time.Until(g.lastRestart.Add(time.Second)))
	g.lastRestart = time.Now()
	g.mu.Lock()
	ok := !g.closed && g.reopenLocked(failed) == nil
	g.mu.Unlock()
	if !ok {
		return false
	}
	g.c.restarts.Add(1)
	g.forget()
	g.overflowAll()
	return true
}

func (g *fanGroup) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// reopenLocked opens a new group and marks what the old one had marked.
func (g *fanGroup) reopenLocked(failed *os.File) error {
	fd, err := unix.FanotifyInit(fanInit, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_LARGEFILE)
	if err != nil {
		return err
	}
	for fs := range g.marks {
		unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, fanMask, unix.AT_FDCWD, procPath(g.mounts[fs]))
	}
	ignoreUnwatched(fd, g.unwatched)
	failed.Close()
	g.f, g.fd = os.NewFile(uintptr(fd), "fanotify"), fd
	return nil
}

// fanWatcher is one consumer's view of a fanGroup: the roots it watches.
// Trees on filesystems the group cannot mark go to an inotify Watcher.
type fanWatcher struct {
	g    *fanGroup    // immutable
	emit func(Change) // immutable

	// g.mu protects the following.
	roots  map[dirID]int // references per root
	ino    *Watcher      // nil until a tree needs it
	closed bool
}

var _ TreeWatcher = (*fanWatcher)(nil)

func (g *fanGroup) newWatcher(emit func(Change)) *fanWatcher {
	w := &fanWatcher{g: g, emit: emit, roots: map[dirID]int{}}
	g.mu.Lock()
	g.watchers[w] = true
	g.mu.Unlock()
	return w
}

func (w *fanWatcher) AddTree(dirfd int) error {
	id, err := w.g.addRoot(dirfd)
	if errors.Is(err, errNoMark) {
		return w.addInotify(dirfd)
	}
	if err != nil {
		return err
	}
	w.g.mu.Lock()
	closed := w.closed
	if !closed {
		if w.roots[id]++; w.roots[id] == 1 {
			w.g.c.trees.Add(1)
		}
	}
	w.g.mu.Unlock()
	if closed {
		w.g.removeRoot(id)
		return os.ErrClosed
	}
	return nil
}

// addInotify watches a tree the group cannot mark with inotify.
func (w *fanWatcher) addInotify(dirfd int) error {
	w.g.mu.Lock()
	if w.ino == nil && !w.closed {
		ino, err := newWatcher(w.emit, w.g.c)
		if err != nil {
			w.g.mu.Unlock()
			return err
		}
		w.ino = ino
	}
	ino := w.ino
	w.g.mu.Unlock()
	if ino == nil {
		return os.ErrClosed
	}
	return ino.AddTree(dirfd)
}

func (w *fanWatcher) RemoveTree(dev, ino uint64) {
	id := dirID{dev, ino}
	w.g.mu.Lock()
	n, fallback := w.roots[id], w.ino
	switch {
	case n > 1:
		w.roots[id]--
	case n == 1:
		delete(w.roots, id)
		w.g.c.trees.Add(-1)
	}
	w.g.mu.Unlock()
	if n > 0 {
		w.g.removeRoot(id)
	} else if fallback != nil {
		fallback.RemoveTree(dev, ino)
	}
}

func (w *fanWatcher) Close() error {
	w.g.mu.Lock()
	roots, fallback := w.roots, w.ino
	w.roots, w.closed = map[dirID]int{}, true
	delete(w.g.watchers, w)
	w.g.c.trees.Add(-int64(len(roots)))
	w.g.mu.Unlock()
	for id, n := range roots {
		for range n {
			w.g.removeRoot(id)
		}
	}
	if fallback != nil {
		return fallback.Close()
	}
	return nil
}

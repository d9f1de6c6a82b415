//go:build linux

package upstream

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// session is one guest's view of the export: its node ids and open
// files. It outlives its connection for ServerOptions.SessionGrace so a
// guest that reconnects carries on with the same ids and open files.
type session struct {
	id    uint64     // immutable
	srv   *Server    // immutable
	nodes *nodeTable // immutable pointer
	root  *node      // immutable
	// replay keeps replies for requests repeated after a reconnect
	// (replay.go); immutable pointer, locks itself.
	replay *replayCache
	// waits are the requests a guest may cancel (server_cancel.go);
	// immutable pointer, locks itself.
	waits *waits

	mu      sync.Mutex // protects the following
	handles map[uint64]*openFile
	next    uint64
	conn    *serverConn
	gen     uint64 // counts attach/detach, so a stale grace timer can tell
	closed  bool
	ev      *sessionEvents // nil until the guest watches something
}

// openFile is a file or directory the guest has open. Its fd lives in
// the server's fd cache and is reopened with flags when evicted.
type openFile struct {
	node  *node // immutable
	flags int   // immutable: open flags for reopening
	dir   bool  // immutable

	// pinned is held while the handle holds locks or the file may have
	// lost its last name; fileFD uses it once the cache has evicted it.
	// Set under mu.
	pinned atomic.Pointer[fdRef]

	mu    sync.Mutex // protects the following; held across a readdir
	pos   uint64     // directory position the fd is at
	atPos *fdRef     // the fd pos refers to
}

func newSession(s *Server, id uint64) *session {
	root := &node{dev: s.rootStat.Dev, ino: s.rootStat.Ino, fmt: unix.S_IFDIR}
	return &session{id: id, srv: s, nodes: newNodeTable(root), root: root, replay: newReplayCache(),
		waits: newWaits(), handles: map[uint64]*openFile{}, next: 1}
}

func (ss *session) rootEntry() (Entry, error) {
	a, err := ss.statNode(ss.root)
	return Entry{Node: RootID, Attr: a}, err
}

func (ss *session) setConn(sc *serverConn) {
	ss.mu.Lock()
	ss.conn = sc
	ss.mu.Unlock()
}

func (ss *session) attached() {
	ss.mu.Lock()
	ss.gen++
	ss.mu.Unlock()
}

// detached records that sc ended. It reports false if the session has
// been resumed on another connection meanwhile: sc's end may be noticed
// only after the guest reconnected.
func (ss *session) detached(sc *serverConn) (uint64, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.conn != sc {
		return 0, false
	}
	ss.gen++
	ss.conn = nil
	return ss.gen, true
}

// expired reports whether the session is still detached since gen.
func (ss *session) expired(gen uint64) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.gen == gen && ss.conn == nil
}

func (ss *session) addHandle(f *openFile) uint64 {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	id := ss.next
	ss.next++
	ss.handles[id] = f
	ss.nodes.addOpen(f.node, 1)
	return id
}

func (ss *session) handle(id uint64) (*openFile, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	f := ss.handles[id]
	if f == nil {
		return nil, unix.EBADF
	}
	return f, nil
}

func (ss *session) release(id uint64) {
	ss.mu.Lock()
	f := ss.handles[id]
	delete(ss.handles, id)
	ss.mu.Unlock()
	if f != nil {
		ss.closeFile(f)
	}
}

func (ss *session) closeFile(f *openFile) {
	ss.nodes.addOpen(f.node, -1)
	ss.srv.fds.remove(f)
	f.mu.Lock()
	if r := f.pinned.Swap(nil); r != nil {
		r.release()
	}
	if f.atPos != nil {
		f.atPos.release()
		f.atPos = nil
	}
	f.mu.Unlock()
}

// pinOpenFiles keeps the fds of n's open files beyond eviction: after
// n's last name is gone they could not be reopened.
func (ss *session) pinOpenFiles(n *node) {
	ss.mu.Lock()
	var files []*openFile
	for _, f := range ss.handles {
		if f.node == n {
			files = append(files, f)
		}
	}
	ss.mu.Unlock()
	for _, f := range files {
		ss.pin(f)
	}
}

func (ss *session) pin(f *openFile) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pinned.Load() != nil {
		return nil
	}
	r, err := ss.fileFD(f)
	if err != nil {
		return err
	}
	f.pinned.Store(r)
	return nil
}

func (ss *session) close() {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return
	}
	ss.closed = true
	if ss.ev != nil {
		defer ss.ev.close()
	}
	files := ss.handles
	ss.handles = map[uint64]*openFile{}
	ss.mu.Unlock()
	ss.waits.cancelAll()
	for _, f := range files {
		ss.closeFile(f)
	}
	ss.nodes.mu.Lock()
	nodes := make([]*node, 0, len(ss.nodes.byID)) // copied: a handler still running may forget some
	for _, n := range ss.nodes.byID {
		nodes = append(nodes, n)
	}
	ss.nodes.mu.Unlock()
	for _, n := range nodes {
		ss.srv.fds.remove(n)
	}
}

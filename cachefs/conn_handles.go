package cachefs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
	lru "github.com/hashicorp/golang-lru/v2"
)

// A connection that answers OPEN and OPENDIR with ENOSYS gets every read,
// write and readdir with fh 0: the kernel keeps no handle of ours. The
// cached connection serves those through handles of its own, one per
// node and kind, opened on first use and kept in a bounded LRU, so the
// host holds a bounded number of descriptors however many files the
// guest has open. A handle in use is closed only once its last user is
// done.

// handleKind is what a connection-held handle is for.
type handleKind uint8

const (
	readHandle  handleKind = iota // read-only, opened lazily (read by node)
	writeHandle                   // read-write on the host
	dirHandle                     // a listing being read
)

type handleKey struct {
	node uint64 // kernel nodeid
	kind handleKind
}

// heldHandle is one handle of the LRU.
type heldHandle struct {
	ready chan struct{} // closed once fh and st are set
	fh    uint64
	st    fuse.Status

	// nodeHandles.mu protects the following.
	refs int
	gone bool // evicted or dropped: released when refs reach 0
}

// nodeHandles holds a connection's handles by node and kind.
type nodeHandles struct {
	open    func(k handleKey) (uint64, fuse.Status) // immutable
	release func(k handleKey, fh uint64)            // immutable

	mu      sync.Mutex // protects the following
	lru     *lru.Cache[handleKey, *heldHandle]
	evicted []evictedHandle // released once mu is let go
}

type evictedHandle struct {
	key handleKey
	h   *heldHandle
}

func newNodeHandles(max int, open func(handleKey) (uint64, fuse.Status), release func(handleKey, uint64)) *nodeHandles {
	t := &nodeHandles{open: open, release: release}
	t.lru, _ = lru.NewWithEvict(max, func(k handleKey, h *heldHandle) {
		t.evicted = append(t.evicted, evictedHandle{k, h}) // under mu: Add and Remove hold it
	})
	return t
}

// get returns k's handle, opening it if needed; put gives it back.
func (t *nodeHandles) get(k handleKey) (*heldHandle, fuse.Status) {
	t.mu.Lock()
	h, ok := t.lru.Get(k)
	if !ok {
		h = &heldHandle{ready: make(chan struct{})}
		t.lru.Add(k, h)
	}
	h.refs++
	t.mu.Unlock()
	t.releaseEvicted()
	if !ok {
		h.fh, h.st = t.open(k)
		close(h.ready)
	}
	<-h.ready
	if !h.st.Ok() {
		t.drop(k, h)
		t.put(k, h)
		return nil, h.st
	}
	return h, fuse.OK
}

func (t *nodeHandles) put(k handleKey, h *heldHandle) {
	t.mu.Lock()
	h.refs--
	last := h.gone && h.refs == 0
	t.mu.Unlock()
	if last && h.st.Ok() {
		t.release(k, h.fh)
	}
}

// drop forgets k's handle h (if it is still k's), to be released when
// its users are done.
func (t *nodeHandles) drop(k handleKey, h *heldHandle) {
	t.mu.Lock()
	if cur, ok := t.lru.Peek(k); ok && cur == h {
		t.lru.Remove(k)
	}
	t.mu.Unlock()
	t.releaseEvicted()
}

// dropKey forgets k's handle, if one is held.
func (t *nodeHandles) dropKey(k handleKey) {
	t.mu.Lock()
	if t.lru.Contains(k) {
		t.lru.Remove(k)
	}
	t.mu.Unlock()
	t.releaseEvicted()
}

// dropNode forgets every handle of node.
func (t *nodeHandles) dropNode(node uint64) {
	for _, kind := range []handleKind{readHandle, writeHandle, dirHandle} {
		t.dropKey(handleKey{node, kind})
	}
}

// peek returns k's handle if one is held, taking a reference.
func (t *nodeHandles) peek(k handleKey) (*heldHandle, bool) {
	t.mu.Lock()
	h, ok := t.lru.Peek(k)
	if ok {
		h.refs++
	}
	t.mu.Unlock()
	if !ok {
		return nil, false
	}
	<-h.ready
	if !h.st.Ok() {
		t.put(k, h)
		return nil, false
	}
	return h, true
}

// releaseEvicted marks what the LRU let go and releases the unused.
func (t *nodeHandles) releaseEvicted() {
	t.mu.Lock()
	ev := t.evicted
	t.evicted = nil
	var free []evictedHandle
	for _, e := range ev {
		e.h.gone = true
		if e.h.refs == 0 {
			free = append(free, e)
		}
	}
	t.mu.Unlock()
	for _, e := range free {
		<-e.h.ready
		if e.h.st.Ok() {
			t.release(e.key, e.h.fh)
		}
	}
}

// len returns how many handles are held.
func (t *nodeHandles) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}

// close releases every held handle that is not in use.
func (t *nodeHandles) close() {
	t.mu.Lock()
	t.lru.Purge()
	t.mu.Unlock()
	t.releaseEvicted()
}

package cachefs

import (
	"context"
	"sync"

	"github.com/cachefs/cachefs/upstream"
)

// handle is a file or directory the kernel has open, known to the kernel
// by its id (the FUSE fh) and to the host by up, valid in epoch.
type handle struct {
	id    uint64 // immutable
	node  *node  // immutable
	flags uint32 // immutable: open flags, for reopening in a new session
	dir   bool   // immutable

	mu    sync.Mutex // protects the following
	up    uint64
	epoch uint64
	buf   *dirBuf  // directories: entries fetched ahead
	snap  *dirSnap // directories served from the cache: the listing
	fill  *dirFill // directories being read whole: the listing so far

	// Local handles (delegated subtrees) read and write the staging file
	// lf (staging_fds.go), or the kernel does (pt: passthrough). writeback.mu protects
	// dirty and plain (counted in writeback.plain: not passthrough).
	lf    *stagedFile
	pt    bool
	dirty bool
	plain bool
	// flushed: the staging file as queued at the last FLUSH (valid if
	// flushedOK); a passthrough handle is written back again at release
	// only if the file changed since.
	flushed   stamp
	flushedOK bool
}

type handleTable struct {
	mu   sync.Mutex // protects the following
	byID map[uint64]*handle
	next uint64
}

func newHandleTable() *handleTable {
	return &handleTable{byID: map[uint64]*handle{}, next: 1}
}

func (t *handleTable) add(h *handle) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	h.id = t.next
	t.next++
	t.byID[h.id] = h
	return h.id
}

func (t *handleTable) get(id uint64) *handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

func (t *handleTable) remove(id uint64) *handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.byID[id]
	delete(t.byID, id)
	return h
}

func (t *handleTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// upHandle returns h's host handle in epoch, opening the file if it was
// opened lazily or the host session changed since it was opened.
func (fs *FS) upHandle(ctx context.Context, h *handle, epoch uint64) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.epoch == epoch {
		return h.up, nil
	}
	up, err := fs.upIDFor(ctx, h.node, epoch)
	if err != nil {
		return 0, err
	}
	var resp upstream.OpenResp
	op, req := upstream.OpOpendir, any(&upstream.NodeReq{Node: up})
	if !h.dir {
		op, req = upstream.OpOpen, &upstream.OpenReq{Node: up, Flags: reopenFlags(h.flags)}
	}
	if err := fs.rpcFor(ctx, epoch, op, req, &resp); err != nil {
		return 0, err
	}
	h.up, h.epoch = resp.Handle, epoch
	return h.up, nil
}

// withHandle resolves a kernel fh and runs f with its host handle and
// the epoch it belongs to.
func (fs *FS) withHandle(ctx context.Context, fh uint64, f func(h *handle, up, epoch uint64) error) fuseStatus {
	h := fs.handles.get(fh)
	if h == nil {
		return fuseBadf
	}
	return fs.call(func(epoch uint64) error {
		up, err := fs.upHandle(ctx, h, epoch)
		if err != nil {
			return err
		}
		return f(h, up, epoch)
	})
}

// lazyOf returns n's handles that were opened lazily and not yet on the
// host.
func (t *handleTable) lazyOf(n *node) []*handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*handle
	for _, h := range t.byID {
		if h.node == n && !h.dir && h.lazy() {
			out = append(out, h)
		}
	}
	return out
}

// materialize opens on the host the lazily opened handles of n before a
// change that may take its last name: afterwards it could not be opened,
// and its open files must keep reading it.
func (fs *FS) materialize(ctx context.Context, n *node, epoch uint64) {
	if n == nil {
		return
	}
	for _, h := range fs.handles.lazyOf(n) {
		fs.upHandle(ctx, h, epoch)
	}
}

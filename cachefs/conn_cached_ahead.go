package cachefs

import (
	"context"
	"strconv"
	"sync"
	"syscall"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sync/singleflight"
)

// Read-ahead of small files. Programs that read a tree (go list, grep
// -r, a compiler) read a directory's small files one after another, and
// a cold read of each is a round trip to the host. On the first read of
// a small file whose directory's listing is cached, the cached
// connection fetches it and its small siblings whole in one OpReadNodes,
// and answers their first reads from memory. A fetched file is served
// only while its attributes have not been dropped since the fetch (any
// change on the host or through the guest drops them, whatever it does
// to the size and mtime) and its cached ones have the size and mtime it
// was read with.

const (
	aheadFileMax  = 64 << 10 // files read ahead are at most this big
	aheadBatch    = 64       // files a fetch asks for at most
	aheadBatchMax = 512 << 10
	aheadBytes    = 32 << 20 // bound on what is held
)

// aheadData is a file read ahead, with its size and mtime as read and
// the metadata cache's generation before the fetch (metaCache.fence).
type aheadData struct {
	size, mtime int64
	gen         uint64
	data        []byte
}

// readAhead holds files read ahead, by host node.
type readAhead struct {
	mu     sync.Mutex // protects files
	files  *costLRU[uint64, aheadData]
	flight singleflight.Group // one fetch a directory at a time
}

func newReadAhead() *readAhead {
	return &readAhead{files: newCostLRU[uint64, aheadData](aheadBytes, func(d aheadData) int { return len(d.data) + 64 }, nil)}
}

// get returns up's data if it was read with attributes a and the node
// did not change since (changedSince of the fetch's generation).
func (r *readAhead) get(up uint64, a *upstream.Attr, changedSince func(gen uint64) bool) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.files.peek(up)
	if !ok {
		return nil, false
	}
	if d.size != int64(a.Size) || d.mtime != a.Mtime || changedSince(d.gen) {
		r.files.remove(up)
		return nil, false
	}
	return d.data, true
}

func (r *readAhead) has(up uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.files.peek(up)
	return ok
}

func (r *readAhead) put(files []upstream.NodeData, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range files {
		r.files.add(f.Node, aheadData{size: f.Size, mtime: f.Mtime, gen: gen, data: f.Data})
	}
}

// readAhead answers a read from the files read ahead, fetching the
// file's directory's small files first on a miss. ok is false when the
// read must go to the host.
func (c *cachedConn) readAhead(ctx context.Context, in *fuse.ReadIn) (fuse.ReadResult, bool) {
	epoch := c.up.Epoch()
	n := c.nodes.get(in.NodeId)
	if n == nil {
		return nil, false
	}
	up, ok := c.nodes.upOf(n, epoch)
	if !ok {
		return nil, false
	}
	a, ok := c.cache.attr(epoch, up)
	if !ok || a.Size > aheadFileMax || a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, false
	}
	changed := func(gen uint64) bool { return c.cache.changedSince(epoch, up, gen) }
	data, ok := c.ahead.get(up, &a, changed)
	if !ok && in.Offset == 0 && c.up.Offers(upstream.OpReadNodes) {
		c.fetchAhead(ctx, n, up, epoch)
		data, ok = c.ahead.get(up, &a, changed)
	}
	if !ok {
		return nil, false
	}
	off := min(in.Offset, uint64(len(data)))
	end := min(off+uint64(in.Size), uint64(len(data)))
	return fuse.ReadResultData(data[off:end]), true
}

// fetchAhead reads n and the small files of its directory's cached
// listing that are not held yet, in one message.
func (c *cachedConn) fetchAhead(ctx context.Context, n *node, up, epoch uint64) {
	parent, _ := c.nodes.where(n)
	if parent == nil {
		return
	}
	pup, ok := c.nodes.upOf(parent, epoch)
	if !ok {
		return
	}
	c.ahead.flight.Do(strconv.FormatUint(pup, 10), func() (any, error) {
		if c.ahead.has(up) {
			return nil, nil // fetched by the call this one waited for
		}
		req := &upstream.ReadNodesReq{Nodes: c.siblings(up, pup, epoch), Max: aheadFileMax}
		gen := c.cache.fence(epoch)
		var resp upstream.ReadNodesResp
		if c.rpcFor(ctx, epoch, upstream.OpReadNodes, req, &resp) == nil {
			c.ahead.put(resp.Files, gen)
		}
		return nil, nil
	})
}

// siblings returns up and the small regular files of directory pup's
// cached listing not held yet, within a batch's bounds.
func (c *cachedConn) siblings(up, pup, epoch uint64) []uint64 {
	nodes := []uint64{up}
	snap, ok := c.cache.listing(epoch, pup)
	if !ok {
		return nodes
	}
	defer c.releaseSnap(snap)
	var bytes uint64
	for _, de := range snap.ents {
		if len(nodes) == aheadBatch || bytes >= aheadBatchMax {
			break
		}
		if de.node == nil || de.attr.Mode&syscall.S_IFMT != syscall.S_IFREG || de.attr.Size > aheadFileMax {
			continue
		}
		sib, ok := c.nodes.upOf(de.node, epoch)
		if !ok || sib == up || c.ahead.has(sib) {
			continue
		}
		nodes = append(nodes, sib)
		bytes += de.attr.Size
	}
	return nodes
}

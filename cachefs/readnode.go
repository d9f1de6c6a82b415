package cachefs

import (
	"context"
	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A file opened lazily (lazyOpen: read-only where data may be cached)
// is read by node with OpReadNode for as long as the host need not hold
// it open: one message per read, where opening it on the host took
// Open, Read and later Release. A handle the host must keep (its file
// is about to lose its last name, locks, a new session's reopen) is
// materialized and read through as before.

// lazy reports whether the host has never opened h.
func (h *handle) lazy() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch == 0
}

// readByNode serves a read of a lazy handle by node. ok is false when
// the handle must be read through the host's handle: the host lacks
// FeatReadNode (checked again for each session), the handle is on the
// host, or it was materialized while this read failed (its file lost
// its last name meanwhile).
func (fs *FS) readByNode(ctx context.Context, in *fuse.ReadIn) (fuse.ReadResult, fuse.Status, bool) {
	h := fs.handles.get(in.Fh)
	if h == nil || h.dir || !h.lazy() {
		return nil, fuse.OK, false
	}
	var data []byte
	unsupported := false
	st := fs.call(func(epoch uint64) error {
		if unsupported = !fs.up.Offers(upstream.OpReadNode); unsupported {
			return nil // a new session with a host that lacks it
		}
		up, err := fs.upIDFor(ctx, h.node, epoch)
		if err != nil {
			return err
		}
		var resp upstream.DataResp
		req := &upstream.ReadNodeReq{Node: up, Offset: int64(in.Offset), Size: in.Size}
		err = fs.rpcFor(ctx, epoch, upstream.OpReadNode, req, &resp)
		data = resp.Data
		return err
	})
	if unsupported || !st.Ok() && !h.lazy() {
		return nil, fuse.OK, false
	}
	return fuse.ReadResultData(data), st, true
}

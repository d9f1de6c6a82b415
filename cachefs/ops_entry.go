package cachefs

import (
	"context"
	"errors"
	"syscall"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Operations on names and attributes.

func (fs *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if fs.actuating(h) {
		if st := fs.actLookup(h, name, out); st != fuse.ENOSYS {
			return st
		}
	}
	if st, ok := fs.keptLookup(h, name, out); ok {
		return st
	}
	if parent := fs.nodes.get(h.NodeId); parent != nil {
		if fs.wb != nil {
			if st, ok := fs.dLookup(parent, name, out); ok {
				return st
			}
		}
		if fs.cachedLookup(parent, name, out) {
			return fuse.OK
		}
	}
	ctx := callerCtx(cancel, h)
	return fs.call(func(epoch uint64) error {
		parent, pup, err := fs.nodeUp(ctx, h.NodeId, epoch)
		if err != nil {
			return err
		}
		if !fs.mayCacheMeta(parent) {
			var resp upstream.EntryResp
			if err := fs.rpcFor(ctx, epoch, upstream.OpLookup, &upstream.LookupReq{Parent: pup, Name: name}, &resp); err != nil {
				return err
			}
			fs.entered(parent, name, &resp.Entry, epoch, out)
			return nil
		}
		return fs.lookupCached(ctx, parent, pup, name, epoch, out)
	})
}

// cachedLookup answers a lookup that the metadata cache holds in full
// (the name, and a positive entry's attributes), with no host call and
// no allocation: a cached subtree's common case. false: nothing was
// done or counted, and the caller asks through lookupCached.
func (fs *FS) cachedLookup(parent *node, name string, out *fuse.EntryOut) bool {
	epoch := fs.up.Epoch()
	pup, ok := fs.nodes.upOf(parent, epoch)
	if !ok || !fs.mayCacheMeta(parent) {
		return false
	}
	de, a, ok := fs.cache.entry(epoch, pup, name)
	if !ok {
		return false
	}
	if de.node == nil {
		fs.negativeEntry(parent, out)
		return true
	}
	fs.nodes.kernelRef(de.node, parent, name)
	fs.fillEntry(out, de.node, &a)
	return true
}

// lookupCached answers a lookup from the metadata cache, or asks the host
// and caches the answer, including a negative one.
func (fs *FS) lookupCached(ctx context.Context, parent *node, pup uint64, name string, epoch uint64, out *fuse.EntryOut) error {
	if de, ok := fs.cache.lookup(epoch, pup, name); ok {
		if de.node == nil {
			fs.negativeEntry(parent, out)
			return nil
		}
		a, ok := fs.cache.attr(epoch, de.node.up)
		if !ok { // the name is known, its attributes are not: ask for them
			gen := fs.cache.fence(epoch)
			var resp upstream.AttrResp
			if err := fs.rpcFor(ctx, epoch, upstream.OpGetattr, &upstream.NodeReq{Node: de.node.up}, &resp); err != nil {
				return err
			}
			a = resp.Attr
			fs.cache.putAttr(epoch, de.node.up, gen, &a)
		}
		fs.nodes.kernelRef(de.node, parent, name)
		fs.fillEntry(out, de.node, &a)
		return nil
	}
	gen := fs.cache.fence(epoch)
	var resp upstream.EntryResp
	err := fs.rpcFor(ctx, epoch, upstream.OpLookup, &upstream.LookupReq{Parent: pup, Name: name}, &resp)
	if errors.Is(err, syscall.ENOENT) {
		fs.cache.putName(epoch, pup, gen, name, nil, nil)
		fs.negativeEntry(parent, out)
		return nil
	}
	if err != nil {
		return err
	}
	n := fs.entered(parent, name, &resp.Entry, epoch, out)
	if cacheable(n.mode) {
		fs.nodes.pin(n)
		if !fs.cache.putName(epoch, pup, gen, name, n, &resp.Entry.Attr) {
			fs.unpin(n)
		}
	}
	return nil
}

// negativeEntry tells the kernel a name does not exist, for as long as
// the directory's mode lets it remember that.
func (fs *FS) negativeEntry(parent *node, out *fuse.EntryOut) {
	*out = fuse.EntryOut{}
	d, _ := fs.timeouts(parent, sIFDIR)
	out.EntryValid, out.EntryValidNsec = setTimeout(d)
}

func (fs *FS) Forget(nodeid, nlookup uint64) {
	up, epoch, refs := fs.nodes.forget(nodeid, nlookup)
	fs.forgets.add(up, epoch, refs)
}

func (fs *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	if n := fs.nodes.get(in.NodeId); n != nil {
		if a, ok := fs.localAttr(n); ok {
			fs.fillAttr(out, n, &a)
			return fuse.OK
		}
	}
	return fs.call(func(epoch uint64) error {
		n, up, err := fs.nodeUp(ctx, in.NodeId, epoch)
		if err != nil {
			return err
		}
		caching := fs.mayCacheMeta(n)
		if caching {
			if a, ok := fs.cache.attr(epoch, up); ok {
				fs.fillAttr(out, n, &a)
				return nil
			}
		}
		gen := fs.cache.fence(epoch)
		var resp upstream.AttrResp
		if err := fs.rpcFor(ctx, epoch, upstream.OpGetattr, &upstream.NodeReq{Node: up}, &resp); err != nil {
			return err
		}
		if caching {
			fs.cache.putAttr(epoch, up, gen, &resp.Attr)
		}
		fs.fillAttr(out, n, &resp.Attr)
		return nil
	})
}

func (fs *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	if fs.actuating(&in.InHeader) {
		return fs.actSetattr(in, out)
	}
	if n := fs.nodes.get(in.NodeId); n != nil && fs.delegated(n) {
		return fs.dSetattr(n, in, out)
	}
	return fs.call(func(epoch uint64) error {
		n, up, err := fs.nodeUp(ctx, in.NodeId, epoch)
		if err != nil {
			return err
		}
		req := setattrReq(in, up)
		if fh, ok := in.GetFh(); ok && req.Valid&upstream.SetSize != 0 {
			if h := fs.handles.get(fh); h != nil && !h.dir {
				if req.Handle, err = fs.upHandle(ctx, h, epoch); err != nil {
					return err
				}
			}
		}
		var resp upstream.AttrResp
		err = fs.rpcFor(ctx, epoch, upstream.OpSetattr, req, &resp)
		fs.cache.dropAttr(up)
		if err != nil {
			return err
		}
		fs.fillAttr(out, n, &resp.Attr)
		return nil
	})
}

// setattrReq translates the kernel's setattr valid bits.
func setattrReq(in *fuse.SetAttrIn, up uint64) *upstream.SetattrReq {
	r := &upstream.SetattrReq{Node: up}
	v := in.Valid
	bits := []struct{ fuse, up uint32 }{
		{fuse.FATTR_MODE, upstream.SetMode}, {fuse.FATTR_UID, upstream.SetUid},
		{fuse.FATTR_GID, upstream.SetGid}, {fuse.FATTR_SIZE, upstream.SetSize},
		{fuse.FATTR_ATIME, upstream.SetAtime}, {fuse.FATTR_MTIME, upstream.SetMtime},
		{fuse.FATTR_ATIME_NOW, upstream.SetAtimeNow}, {fuse.FATTR_MTIME_NOW, upstream.SetMtimeNow},
		{fuse.FATTR_KILL_SUIDGID, upstream.SetKillSuidgid},
	}
	for _, b := range bits {
		if v&b.fuse != 0 {
			r.Valid |= b.up
		}
	}
	r.Mode, r.Uid, r.Gid, r.Size = in.Mode, in.Uid, in.Gid, in.Size
	r.Atime = int64(in.Atime)*1e9 + int64(in.Atimensec)
	r.Mtime = int64(in.Mtime)*1e9 + int64(in.Mtimensec)
	return r
}

func (fs *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	ctx := callerCtx(cancel, h)
	if n := fs.nodes.get(h.NodeId); n != nil && fs.wb != nil {
		fs.wb.mu.Lock()
		l := n.local
		fs.wb.mu.Unlock()
		if l != nil && l.target != "" {
			return []byte(l.target), fuse.OK
		}
	}
	var target []byte
	st := fs.call(func(epoch uint64) error {
		_, up, err := fs.nodeUp(ctx, h.NodeId, epoch)
		if err != nil {
			return err
		}
		var resp upstream.ReadlinkResp
		err = fs.rpcFor(ctx, epoch, upstream.OpReadlink, &upstream.NodeReq{Node: up}, &resp)
		target = []byte(resp.Target)
		return err
	})
	return target, st
}

func (fs *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	ctx := callerCtx(cancel, h)
	return fs.call(func(epoch uint64) error {
		var r upstream.StatfsResp
		if err := fs.rpcFor(ctx, epoch, upstream.OpStatfs, &upstream.Empty{}, &r); err != nil {
			return err
		}
		*out = fuse.StatfsOut{Blocks: r.Blocks, Bfree: r.Bfree, Bavail: r.Bavail, Files: r.Files,
			Ffree: r.Ffree, Bsize: r.Bsize, NameLen: r.NameLen, Frsize: r.Frsize}
		return nil
	})
}

// entered records a host entry the kernel is being given and fills out.
func (fs *FS) entered(parent *node, name string, e *upstream.Entry, epoch uint64, out *fuse.EntryOut) *node {
	n := fs.nodes.add(parent, name, e.Node, epoch, &e.Attr)
	fs.fillEntry(out, n, &e.Attr)
	return n
}

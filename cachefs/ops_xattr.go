package cachefs

import (
	"errors"
	"syscall"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Extended attributes are forwarded as they are.

// capXattr is what the kernel asks for before writes (file capabilities
// are dropped on write).
const capXattr = "security.capability"

func (fs *FS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if attr == capXattr {
		if n := fs.nodes.get(h.NodeId); n != nil && fs.nodes.hasNoCaps(n) {
			return 0, fuse.ENOATTR
		}
	}
	return fs.xattrGet(callerCtx(cancel, h), h.NodeId, upstream.OpGetxattr, attr, dest)
}

// xattrChanged forgets that a node is known to lack capabilities.
func (fs *FS) xattrChanged(nodeid uint64) {
	if n := fs.nodes.get(nodeid); n != nil {
		fs.nodes.setNoCaps(n, false)
	}
}

func (fs *FS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	return fs.xattrGet(callerCtx(cancel, h), h.NodeId, upstream.OpListxattr, "", dest)
}

// xattrGet asks for a value or list into dest; an empty dest asks only
// for the size.
func (fs *FS) xattrGet(ctx *waitCtx, nodeid uint64, op upstream.Op, attr string, dest []byte) (uint32, fuse.Status) {
	if n := fs.nodes.get(nodeid); n != nil && fs.fresh(n) {
		if op == upstream.OpListxattr {
			return 0, fuse.OK // made by the guest, not written back: none yet
		}
		return 0, fuse.ENOATTR
	}
	var size uint32
	st := fs.call(func(epoch uint64) error {
		n, up, err := fs.nodeUp(ctx, nodeid, epoch)
		if err != nil {
			return err
		}
		caching := fs.mayCacheMeta(n)
		if caching && fs.cache.xattrAbsent(epoch, up, attr) {
			if op == upstream.OpListxattr {
				return nil // none: an empty list
			}
			return syscall.ENODATA
		}
		caching = caching && op == upstream.OpGetxattr
		var resp upstream.XattrResp
		if err := fs.rpcFor(ctx, epoch, op, &upstream.XattrReq{Node: up, Name: attr, Size: uint32(len(dest))}, &resp); err != nil {
			if caching && errors.Is(err, syscall.ENODATA) {
				fs.cache.noteXattrAbsent(epoch, up, attr)
			}
			return err
		}
		size = resp.Size
		copy(dest, resp.Data)
		return nil
	})
	return size, st
}

func (fs *FS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	fs.xattrChanged(in.NodeId)
	fs.hostFirst(in.NodeId)
	return fs.call(func(epoch uint64) error {
		_, up, err := fs.nodeUp(ctx, in.NodeId, epoch)
		if err != nil {
			return err
		}
		defer fs.cache.dropAttr(up)
		return fs.rpcFor(ctx, epoch, upstream.OpSetxattr, &upstream.SetxattrReq{Node: up, Name: attr, Data: data, Flags: in.Flags}, &upstream.Empty{})
	})
}

func (fs *FS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	ctx := callerCtx(cancel, h)
	fs.xattrChanged(h.NodeId)
	fs.hostFirst(h.NodeId)
	return fs.call(func(epoch uint64) error {
		_, up, err := fs.nodeUp(ctx, h.NodeId, epoch)
		if err != nil {
			return err
		}
		return fs.rpcFor(ctx, epoch, upstream.OpRemovexattr, &upstream.XattrReq{Node: up, Name: attr}, &upstream.Empty{})
	})
}

package cachefs

import (
	"context"
	"sync/atomic"

	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Requests from the actuator thread are answered here, from the guest's
// own knowledge and read-only host calls: they exist to make the kernel
// raise inotify events, not to change anything.

// actuating reports whether a request comes from the actuator.
func (fs *FS) actuating(h *fuse.InHeader) bool {
	return fs.act != nil && h.Pid == fs.act.Tid()
}

// phantomIDs number nodes that stand for names already gone on the host;
// the high bit keeps them apart from host node ids.
var phantomIDs atomic.Uint64

// actLookup answers an actuator lookup: names being created look
// absent, names being deleted or moved look present.
func (fs *FS) actLookup(h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	parent := fs.nodes.get(h.NodeId)
	if parent == nil {
		return fuse.ENOENT
	}
	pend, ok := fs.actPending.peek(kernelName{parent.id, name})
	if !ok {
		return fuse.ENOSYS // not an expected name: the caller looks it up as usual
	}
	if pend.absent {
		*out = fuse.EntryOut{}
		return fuse.OK
	}
	mode := uint32(sIFREG | 0644)
	if pend.isDir {
		mode = sIFDIR | 0755
	}
	if n := fs.nodes.child(parent, name); n != nil && n.mode == mode&sIFMT {
		fs.nodes.kernelRef(n, parent, name)
		*out = fuse.EntryOut{NodeId: n.id, Attr: fuse.Attr{Mode: mode, Nlink: 1}}
		return fuse.OK
	}
	up := 1<<63 | phantomIDs.Add(1)
	n := fs.nodes.add(parent, name, up, fs.up.Epoch(), &upstream.Attr{Mode: mode, Ino: up})
	*out = fuse.EntryOut{NodeId: n.id, Attr: fuse.Attr{Ino: up, Mode: mode, Nlink: 1}}
	return fuse.OK
}

// actCreate answers the actuator's mknod, mkdir or symlink with the
// host's entry found before.
func (fs *FS) actCreate(h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	parent := fs.nodes.get(h.NodeId)
	if parent == nil {
		return fuse.ENOENT
	}
	pend, ok := fs.actPending.take(kernelName{parent.id, name})
	if !ok || pend.entry == nil {
		return fuse.EPERM
	}
	fs.entered(parent, name, pend.entry, fs.up.Epoch(), out)
	return fuse.OK
}

// actRemove answers the actuator's unlink or rmdir.
func (fs *FS) actRemove(h *fuse.InHeader, name string) fuse.Status {
	if parent := fs.nodes.get(h.NodeId); parent != nil {
		fs.nodes.removed(parent, name)
	}
	return fuse.OK
}

// actRename answers the actuator's rename.
func (fs *FS) actRename(in *fuse.RenameIn, name, newName string) fuse.Status {
	p, np := fs.nodes.get(in.NodeId), fs.nodes.get(in.Newdir)
	if p != nil && np != nil {
		fs.nodes.moved(p, name, np, newName)
	}
	return fuse.OK
}

// actSetattr answers the actuator's truncate or chmod with the host's
// current attributes, changing nothing.
func (fs *FS) actSetattr(in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	return fs.call(func(epoch uint64) error {
		n, up, err := fs.nodeUp(context.Background(), in.NodeId, epoch)
		if err != nil {
			return err
		}
		var resp upstream.AttrResp
		if err := fs.rpc(upstream.OpGetattr, &upstream.NodeReq{Node: up}, &resp); err != nil {
			return err
		}
		fs.fillAttr(out, n, &resp.Attr)
		return nil
	})
}

var _ = invalidation.Create

package cachefs

import (
	"syscall"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Operations that change the directory tree: forwarded to the host, the
// guest's node table updated after the host agreed.

// makeEntry sends a request that creates name in the directory nodeid
// and fills the kernel's entry from the reply.
func (fs *FS) makeEntry(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut, op upstream.Op, req func(pup uint64) any) fuse.Status {
	if fs.actuating(h) {
		return fs.actCreate(h, name, out)
	}
	nodeid := h.NodeId
	ctx := callerCtx(cancel, h)
	return fs.call(func(epoch uint64) error {
		parent, pup, err := fs.nodeUp(ctx, nodeid, epoch)
		if err != nil {
			return err
		}
		var resp upstream.EntryResp
		err = fs.rpcFor(ctx, epoch, op, req(pup), &resp)
		fs.dirChanged(pup)
		if err != nil {
			return err
		}
		fs.entered(parent, name, &resp.Entry, epoch, out)
		return nil
	})
}

// dirChanged drops what the guest knows of a directory the guest just
// changed (or tried to): its names and its attributes.
func (fs *FS) dirChanged(dir uint64) {
	fs.cache.dropDir(dir)
	fs.cache.dropAttr(dir)
}

// nameNode returns the node known as name in parent, if any: a node
// with several names is indexed under the last one seen, so the cache
// is asked too.
func (fs *FS) nameNode(parent *node, pup uint64, name string, epoch uint64) *node {
	if n := fs.nodes.child(parent, name); n != nil {
		return n
	}
	return fs.cache.peekName(epoch, pup, name)
}

// nodesChanged drops the cached attributes of host nodes.
func (fs *FS) nodesChanged(ups []uint64) {
	for _, up := range ups {
		fs.cache.dropAttr(up)
	}
}

// nodeChanged drops the cached attributes of a node the guest changed.
func (fs *FS) nodeChanged(n *node, epoch uint64) {
	if n == nil {
		return
	}
	if up, ok := fs.nodes.upOf(n, epoch); ok {
		fs.cache.dropAttr(up)
		fs.nodeWritten(up)
	}
}

func (fs *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if parent := fs.delegatedDir(&in.InHeader); parent != nil {
		if in.Mode&sIFMT == sIFREG {
			_, st := fs.dCreate(parent, name, in.Mode, "", caller(&in.InHeader), out, false)
			return st
		}
		defer fs.adoptCreated(parent, name, out)
		fs.writeBackFirst()
	}
	return fs.makeEntry(cancel, &in.InHeader, name, out, upstream.OpMknod, func(pup uint64) any {
		return &upstream.MknodReq{Parent: pup, Name: name, Mode: in.Mode, Rdev: in.Rdev, Caller: caller(&in.InHeader)}
	})
}

func (fs *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if parent := fs.delegatedDir(&in.InHeader); parent != nil {
		_, st := fs.dCreate(parent, name, sIFDIR|in.Mode&07777, "", caller(&in.InHeader), out, false)
		return st
	}
	return fs.makeEntry(cancel, &in.InHeader, name, out, upstream.OpMkdir, func(pup uint64) any {
		return &upstream.MknodReq{Parent: pup, Name: name, Mode: in.Mode, Caller: caller(&in.InHeader)}
	})
}

func (fs *FS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if parent := fs.delegatedDir(h); parent != nil {
		_, st := fs.dCreate(parent, name, sIFLNK|0777, target, caller(h), out, false)
		return st
	}
	return fs.makeEntry(cancel, h, name, out, upstream.OpSymlink, func(pup uint64) any {
		return &upstream.SymlinkReq{Parent: pup, Name: name, Target: target, Caller: caller(h)}
	})
}

func (fs *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	if parent := fs.delegatedDir(&in.InHeader); parent != nil {
		defer fs.adoptCreated(parent, name, out)
		fs.writeBackFirst()
	}
	return fs.call(func(epoch uint64) error {
		_, up, err := fs.nodeUp(ctx, in.Oldnodeid, epoch)
		if err != nil {
			return err
		}
		parent, pup, err := fs.nodeUp(ctx, in.NodeId, epoch)
		if err != nil {
			return err
		}
		var resp upstream.EntryResp
		err = fs.rpcFor(ctx, epoch, upstream.OpLink, &upstream.LinkReq{Node: up, NewParent: pup, NewName: name}, &resp)
		fs.dirChanged(pup)
		fs.cache.dropAttr(up)
		if err != nil {
			return err
		}
		fs.entered(parent, name, &resp.Entry, epoch, out)
		return nil
	})
}

func (fs *FS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if fs.actuating(h) {
		return fs.actRemove(h, name)
	}
	if parent := fs.delegatedDir(h); parent != nil {
		return fs.dRemove(parent, name, false)
	}
	return fs.remove(callerCtx(cancel, h), h.NodeId, name, upstream.OpUnlink)
}

func (fs *FS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if fs.actuating(h) {
		return fs.actRemove(h, name)
	}
	if parent := fs.delegatedDir(h); parent != nil {
		return fs.dRemove(parent, name, true)
	}
	return fs.remove(callerCtx(cancel, h), h.NodeId, name, upstream.OpRmdir)
}

func (fs *FS) remove(ctx *waitCtx, nodeid uint64, name string, op upstream.Op) fuse.Status {
	return fs.call(func(epoch uint64) error {
		parent, pup, err := fs.nodeUp(ctx, nodeid, epoch)
		if err != nil {
			return err
		}
		fs.materialize(ctx, fs.nameNode(parent, pup, name, epoch), epoch)
		var resp upstream.ChangedResp
		err = fs.rpcFor(ctx, epoch, op, &upstream.UnlinkReq{Parent: pup, Name: name}, &resp)
		fs.dirChanged(pup)
		fs.nodesChanged(resp.Nodes)
		if err != nil {
			return err
		}
		fs.nodes.removed(parent, name)
		return nil
	})
}

func (fs *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, name, newName string) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	if fs.actuating(&in.InHeader) {
		return fs.actRename(in, name, newName)
	}
	if p, np := fs.delegatedDir(&in.InHeader), fs.nodes.get(in.Newdir); p != nil || (np != nil && fs.delegated(np)) {
		if p == nil || np == nil || !fs.delegated(np) {
			return fuse.Status(syscall.EXDEV) // across consistency modes: copy and delete
		}
		if st := fs.dRename(p, name, np, newName, in.Flags); st != fuse.ENOSYS {
			return st
		}
		fs.writeBackFirst()
		fs.disown(p, np)
	}
	return fs.call(func(epoch uint64) error {
		parent, pup, err := fs.nodeUp(ctx, in.NodeId, epoch)
		if err != nil {
			return err
		}
		newParent, npup, err := fs.nodeUp(ctx, in.Newdir, epoch)
		if err != nil {
			return err
		}
		req := &upstream.RenameReq{Parent: pup, Name: name, NewParent: npup, NewName: newName, Flags: in.Flags}
		fs.materialize(ctx, fs.nameNode(newParent, npup, newName, epoch), epoch)
		var resp upstream.ChangedResp
		err = fs.rpcFor(ctx, epoch, upstream.OpRename, req, &resp)
		fs.dirChanged(pup)
		fs.dirChanged(npup)
		fs.nodesChanged(resp.Nodes)
		if err != nil {
			return err
		}
		if in.Flags&upstream.RenameExchange != 0 {
			fs.nodes.exchanged(parent, name, newParent, newName)
		} else {
			fs.nodes.moved(parent, name, newParent, newName)
		}
		return nil
	})
}

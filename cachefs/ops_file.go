package cachefs

import (
	"context"
	"syscall"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// File operations. Data goes through to the host; the kernel's page
// cache keeps file data across opens only where the mode allows.

// reopenFlags are the flags to open an already open file again with.
func reopenFlags(flags uint32) uint32 {
	return flags &^ (syscall.O_TRUNC | syscall.O_CREAT | syscall.O_EXCL)
}

func (fs *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	n := fs.nodes.get(in.NodeId)
	if n == nil {
		return fuse.Status(syscall.ESTALE)
	}
	if fs.wb != nil && fs.delegated(n) {
		if st, ok := fs.dOpen(n, in.Flags, out); ok {
			return st
		} // else counted as a handle that is not passthrough
	} else {
		fs.countPlain(n) // before the host has it: no passthrough open may race
	}
	st := fs.call(func(epoch uint64) error {
		up, err := fs.upIDFor(ctx, n, epoch)
		if err != nil {
			return err
		}
		out.OpenFlags = fs.openFlags(n)
		h := &handle{node: n, flags: in.Flags, plain: fs.wb != nil}
		if fs.lazyOpen(n, in.Flags) {
			out.Fh = fs.handles.add(h)
			out.OpenFlags |= fs.noFlush(n)
			return nil
		}
		var resp upstream.OpenResp
		if err := fs.rpcFor(ctx, epoch, upstream.OpOpen, &upstream.OpenReq{Node: up, Flags: in.Flags}, &resp); err != nil {
			return err
		}
		if in.Flags&syscall.O_TRUNC != 0 {
			fs.nodeChanged(n, epoch) // the cached size is no more
		}
		h.up, h.epoch = resp.Handle, epoch
		out.Fh = fs.handles.add(h)
		if in.Flags&syscall.O_TRUNC != 0 {
			fs.cache.dropAttr(up) // the size cached before is stale
		}
		return nil
	})
	if !st.Ok() {
		fs.uncountPlain(n)
	}
	return st
}

// lazyOpen reports whether a read-only open may wait for the first read
// to reach the host: where data may be cached, reads the page cache
// answers never need the host at all. Epoch 0 marks such a handle.
func (fs *FS) lazyOpen(n *node, flags uint32) bool {
	return flags&(syscall.O_ACCMODE|syscall.O_TRUNC) == syscall.O_RDONLY &&
		cacheable(n.mode) && fs.modeOf(n).MayCacheData()
}

func (fs *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	if parent := fs.delegatedDir(&in.InHeader); parent != nil {
		return fs.dCreateOpen(parent, name, in, out)
	}
	return fs.call(func(epoch uint64) error {
		parent, pup, err := fs.nodeUp(ctx, in.NodeId, epoch)
		if err != nil {
			return err
		}
		req := &upstream.CreateReq{Parent: pup, Name: name, Flags: in.Flags, Mode: in.Mode, Caller: caller(&in.InHeader)}
		var resp upstream.CreateResp
		err = fs.rpcFor(ctx, epoch, upstream.OpCreate, req, &resp)
		fs.dirChanged(pup)
		if err != nil {
			return err
		}
		n := fs.entered(parent, name, &resp.Entry, epoch, &out.EntryOut)
		fs.nodes.setNoCaps(n, resp.Created)
		fs.countPlain(n)
		h := &handle{node: n, flags: in.Flags, up: resp.Handle, epoch: epoch, plain: fs.wb != nil}
		out.Fh = fs.handles.add(h)
		out.OpenFlags = fs.openFlags(n)
		return nil
	})
}

func (fs *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	ctx := callerCtx(cancel, &in.InHeader)
	if h := fs.localHandle(in.Fh); h != nil {
		return fs.lRead(h, in, buf)
	}
	if r, st, ok := fs.stagedRead(in, buf); ok {
		return r, st
	}
	if r, st, ok := fs.readByNode(ctx, in); ok {
		return r, st
	}
	var data []byte
	st := fs.withHandle(ctx, in.Fh, func(_ *handle, up, epoch uint64) error {
		var resp upstream.DataResp
		err := fs.rpcFor(ctx, epoch, upstream.OpRead, &upstream.ReadReq{Handle: up, Offset: int64(in.Offset), Size: in.Size}, &resp)
		data = resp.Data
		return err
	})
	return fuse.ReadResultData(data), st
}

func (fs *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	ctx := callerCtx(cancel, &in.InHeader)
	if h := fs.localHandle(in.Fh); h != nil {
		return fs.lWrite(h, in, data)
	}
	var written uint32
	st := fs.withHandle(ctx, in.Fh, func(h *handle, up, epoch uint64) error {
		defer fs.nodeChanged(h.node, fs.up.Epoch())
		req := &upstream.WriteReq{Handle: up, Offset: int64(in.Offset), Gid: in.Caller.Gid, Data: data}
		if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
			req.Flags |= upstream.WriteKillSuidgid
		}
		var resp upstream.WriteResp
		err := fs.rpcFor(ctx, epoch, upstream.OpWrite, req, &resp)
		written = resp.Written
		return err
	})
	return written, st
}

// noFlush returns FOPEN_NOFLUSH for a lazy read-only open of a file
// with no advisory locks taken on it in this mount: its close(2) then
// costs no FLUSH request, as Flush would have nothing to do. Locks
// taken later through such an open end at its release (the host drops
// an owner's locks with the last handle it locked through) rather than
// at the first close(2) of any of the owner's descriptors of the file.
func (fs *FS) noFlush(n *node) uint32 {
	if fs.nodes.hasLocks(n) {
		return 0
	}
	return fuse.FOPEN_NOFLUSH
}

// Flush is called at each close(2). Data was written through already, so
// only locks need the host: POSIX locks of the closing owner on the file
// end, whichever of its descriptors took them.
func (fs *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	h := fs.handles.get(in.Fh)
	if h == nil {
		return fuse.EBADF
	}
	if h.lf != nil {
		fs.lFlush(h)
	}
	if !fs.nodes.hasLocks(h.node) {
		return fuse.OK
	}
	// Not the caller's: the kernel does not interrupt a FLUSH, and a
	// dying process's closes are what must drop its locks on the host.
	return fs.withHandle(context.Background(), in.Fh, func(_ *handle, up, epoch uint64) error {
		req := &upstream.LockReq{Handle: up, Owner: in.LockOwner,
			Lock: upstream.Lock{Start: 0, End: ^uint64(0), Type: syscall.F_UNLCK}}
		return fs.rpcFor(context.Background(), epoch, upstream.OpSetlk, req, &upstream.Empty{})
	})
}

func (fs *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	if h := fs.localHandle(in.Fh); h != nil {
		return fs.lFsync(h)
	}
	return fs.withHandle(ctx, in.Fh, func(_ *handle, up, epoch uint64) error {
		return fs.rpcFor(ctx, epoch, upstream.OpFsync, &upstream.FsyncReq{Handle: up, Datasync: in.FsyncFlags&1 != 0}, &upstream.Empty{})
	})
}

func (fs *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	if h := fs.localHandle(in.Fh); h != nil {
		fs.lRelease(h)
		fs.release(in.Fh, upstream.OpRelease) // and its host handle, if locks made one
		return
	}
	fs.release(in.Fh, upstream.OpRelease)
}

// release drops a handle; the host is told unless its session is gone.
func (fs *FS) release(fh uint64, op upstream.Op) {
	h := fs.handles.remove(fh)
	if h == nil {
		return
	}
	fs.releasePlain(h)
	h.mu.Lock()
	up, epoch := h.up, h.epoch
	h.mu.Unlock()
	if epoch == fs.up.Epoch() {
		fs.rpc(op, &upstream.HandleReq{Handle: up}, &upstream.Empty{})
	}
}

func (fs *FS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	if h := fs.localHandle(in.Fh); h != nil {
		return fs.lFallocate(h, in)
	}
	return fs.withHandle(ctx, in.Fh, func(h *handle, up, epoch uint64) error {
		defer fs.nodeChanged(h.node, fs.up.Epoch())
		req := &upstream.FallocateReq{Handle: up, Mode: in.Mode, Offset: int64(in.Offset), Length: int64(in.Length)}
		return fs.rpcFor(ctx, epoch, upstream.OpFallocate, req, &upstream.Empty{})
	})
}

func (fs *FS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	if h := fs.localHandle(in.Fh); h != nil {
		return fs.lLseek(h, in, out)
	}
	return fs.withHandle(ctx, in.Fh, func(_ *handle, up, epoch uint64) error {
		var resp upstream.LseekResp
		err := fs.rpcFor(ctx, epoch, upstream.OpLseek, &upstream.LseekReq{Handle: up, Offset: int64(in.Offset), Whence: in.Whence}, &resp)
		out.Offset = uint64(resp.Offset)
		return err
	})
}

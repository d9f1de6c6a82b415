package cachefs

import (
	"context"
	"math"
	"syscall"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Advisory locks, POSIX and flock, are forwarded to the host so that
// guest and host processes exclude each other.

func lockReq(in *fuse.LkIn, up uint64, wait bool) *upstream.LockReq {
	return &upstream.LockReq{Handle: up, Owner: in.Owner, Flock: in.LkFlags&fuse.FUSE_LK_FLOCK != 0, Wait: wait,
		Lock: upstream.Lock{Start: in.Lk.Start, End: in.Lk.End, Type: in.Lk.Typ, Pid: in.Lk.Pid}}
}

func (fs *FS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	fs.hostHandleFirst(in.Fh)
	ctx := callerCtx(cancel, &in.InHeader)
	return fs.withHandle(ctx, in.Fh, func(_ *handle, up, epoch uint64) error {
		var resp upstream.LockResp
		if err := fs.rpcFor(ctx, epoch, upstream.OpGetlk, lockReq(in, up, false), &resp); err != nil {
			return err
		}
		l := resp.Lock
		if l.End == ^uint64(0) {
			l.End = math.MaxInt64 // the kernel's OFFSET_MAX: to the end of the file
		}
		out.Lk = fuse.FileLock{Start: l.Start, End: l.End, Typ: l.Type, Pid: l.Pid}
		return nil
	})
}

func (fs *FS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return fs.setLk(cancel, in, false)
}

func (fs *FS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return fs.setLk(cancel, in, true)
}

// setLk forwards a lock request. A blocking one may wait as long as the
// holder keeps its lock; an interrupt from the kernel cancels it on the
// host, and the answer is the host's: EINTR, or success if the lock was
// granted before the cancel got there.
func (fs *FS) setLk(cancel <-chan struct{}, in *fuse.LkIn, wait bool) fuse.Status {
	fs.hostHandleFirst(in.Fh)
	var ctx context.Context = callerCtx(cancel, &in.InHeader)
	if wait {
		ctx = anySignal{ctx} // any signal ends the wait, not only a fatal one
	}
	return fs.withHandle(ctx, in.Fh, func(h *handle, up, epoch uint64) error {
		if in.Lk.Typ != syscall.F_UNLCK {
			fs.nodes.setLocked(h.node)
		}
		return fs.up.CallIn(ctx, epoch, upstream.OpSetlk, lockReq(in, up, wait), &upstream.Empty{})
	})
}

// anySignal is a request's context that ends at any interrupt: not an
// upstream.Interruptible, so its Done alone ends a wait.
type anySignal struct{ context.Context }

package cachefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// cachedConn serves cached mode over a kernel connection of its own,
// where the guest kernel answers opens, closes and warm reads, stats and
// listings alone (docs/connections.md):
//   - OPEN, OPENDIR, FLUSH and CREATE are answered ENOSYS, once: the
//     kernel then never sends OPEN, RELEASE, OPENDIR, RELEASEDIR or FLUSH
//     again on this connection, keeps file pages across opens and caches
//     listings itself (fc->no_open, no_opendir, no_flush); creates come
//     as MKNOD.
//   - Reads, writes and listings therefore arrive with fh 0 and are served
//     through the connection's own handles (conn_handles.go).
//   - Locks are the guest kernel's: with no FLUSH at close, a lock held on
//     the host would outlive its owner, so they are not negotiated.
//
// Everything else is the FS's cached mode (its policy is Cached for every
// path), and the FS's caches and events keep the kernel's copies right.
type cachedConn struct {
	*FS
	held  *nodeHandles // immutable pointer
	gone  removals     // conn_cached_remove.go
	ahead *readAhead   // immutable pointer (conn_cached_ahead.go)
}

// maxHeldHandles bounds the handles a cached connection keeps open.
const maxHeldHandles = 256

func newCachedConn(fs *FS) *cachedConn {
	c := &cachedConn{FS: fs, gone: removals{kept: map[uint64]*heldHandle{}, dirs: map[uint64]fuse.Attr{}},
		ahead: newReadAhead()}
	c.held = newNodeHandles(maxHeldHandles, c.openHeld, c.releaseHeld)
	return c
}

func (c *cachedConn) String() string { return "cachefs-cached" }

func (c *cachedConn) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return fuse.ENOSYS
}

func (c *cachedConn) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return fuse.ENOSYS
}

func (c *cachedConn) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	return fuse.ENOSYS
}

func (c *cachedConn) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return fuse.ENOSYS
}

// openHeld opens a handle of the connection's own through the FS.
func (c *cachedConn) openHeld(k handleKey) (uint64, fuse.Status) {
	in := &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: k.node}}
	var out fuse.OpenOut
	var st fuse.Status
	switch k.kind {
	case dirHandle:
		st = c.FS.OpenDir(nil, in, &out)
	case writeHandle:
		in.Flags = syscall.O_RDWR
		if st = c.FS.Open(nil, in, &out); st == fuse.EACCES {
			in.Flags = syscall.O_WRONLY // a file its owner may only write
			st = c.FS.Open(nil, in, &out)
		}
	default:
		in.Flags = syscall.O_RDONLY
		st = c.FS.Open(nil, in, &out)
	}
	return out.Fh, st
}

func (c *cachedConn) releaseHeld(k handleKey, fh uint64) {
	in := &fuse.ReleaseIn{Fh: fh}
	if k.kind == dirHandle {
		c.FS.ReleaseDir(in)
		return
	}
	c.FS.Release(nil, in)
}

// with runs f with the fh of node's handle of kind.
func (c *cachedConn) with(node uint64, kind handleKind, f func(fh uint64) fuse.Status) fuse.Status {
	k := handleKey{node, kind}
	if kind == readHandle {
		if h, ok := c.keptHandle(node); ok { // the file lost a name: read what is kept
			defer c.held.put(k, h)
			return f(h.fh)
		}
	}
	h, st := c.held.get(k)
	if !st.Ok() {
		return st
	}
	defer c.held.put(k, h)
	return f(h.fh)
}

func (c *cachedConn) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	ctx := callerCtx(cancel, &in.InHeader)
	if r, ok := c.readAhead(ctx, in); ok {
		return r, fuse.OK
	}
	var r fuse.ReadResult
	st := c.with(in.NodeId, readHandle, func(fh uint64) fuse.Status {
		r2 := *in
		r2.Fh = fh
		var st fuse.Status
		r, st = c.FS.Read(cancel, &r2, buf)
		return st
	})
	return r, st
}

func (c *cachedConn) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	var n uint32
	st := c.with(in.NodeId, writeHandle, func(fh uint64) fuse.Status {
		w := *in
		w.Fh = fh
		var st fuse.Status
		n, st = c.FS.Write(cancel, &w, data)
		return st
	})
	return n, st
}

// Fsync syncs through the handle that wrote, or any handle of the file:
// fsync on the host syncs the inode whichever descriptor asks.
func (c *cachedConn) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	kind := readHandle
	if h, ok := c.held.peek(handleKey{in.NodeId, writeHandle}); ok {
		c.held.put(handleKey{in.NodeId, writeHandle}, h)
		kind = writeHandle
	}
	return c.with(in.NodeId, kind, func(fh uint64) fuse.Status {
		f := *in
		f.Fh = fh
		return c.FS.Fsync(cancel, &f)
	})
}

func (c *cachedConn) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	return c.with(in.NodeId, writeHandle, func(fh uint64) fuse.Status {
		f := *in
		f.Fh = fh
		return c.FS.Fallocate(cancel, &f)
	})
}

// hostLseek asks the host through the node's read handle.
func (c *cachedConn) hostLseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	return c.with(in.NodeId, readHandle, func(fh uint64) fuse.Status {
		l := *in
		l.Fh = fh
		return c.FS.Lseek(cancel, &l, out)
	})
}

func (c *cachedConn) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return c.readDir(in, func(r *fuse.ReadIn) fuse.Status { return c.FS.ReadDir(cancel, r, out) })
}

func (c *cachedConn) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return c.readDir(in, func(r *fuse.ReadIn) fuse.Status { return c.FS.ReadDirPlus(cancel, r, out) })
}

// readDir reads a listing through the directory's held handle: a read
// from offset 0 starts a new listing, later ones go on with it.
func (c *cachedConn) readDir(in *fuse.ReadIn, read func(*fuse.ReadIn) fuse.Status) fuse.Status {
	if in.Offset == 0 {
		c.held.dropKey(handleKey{in.NodeId, dirHandle})
	}
	return c.with(in.NodeId, dirHandle, func(fh uint64) fuse.Status {
		r := *in
		r.Fh = fh
		return read(&r)
	})
}

func (c *cachedConn) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return fuse.OK // changes reach the host before they are answered
}

// Forget drops the node's held handles once the kernel forgot it.
func (c *cachedConn) Forget(nodeid, nlookup uint64) {
	c.FS.Forget(nodeid, nlookup)
	if c.nodes.get(nodeid) == nil {
		c.held.dropNode(nodeid)
		c.forgotten(nodeid)
	}
}

func (c *cachedConn) OnUnmount() {
	c.held.close()
	c.FS.OnUnmount()
}

// MountCached mounts fs, whose policy is Cached for every path, as the
// cached mode's own connection at dir.
func MountCached(fs *FS, dir string, o MountOptions) (*fuse.Server, error) {
	return serve(newCachedConn(fs), fs, dir, cachedMountOptions(o), o)
}

// cachedMountOptions are the kernel settings of a cached connection.
func cachedMountOptions(o MountOptions) *fuse.MountOptions {
	opts := baseMountOptions(o)
	// Only the guest kernel's locks: no FLUSH tells the host when an
	// owner closes, so a host lock could outlive it.
	opts.EnableLocks = false
	// Access ACLs are cached by the kernel and checked by it.
	opts.EnableAcl = true
	opts.EnableSymlinkCaching = true
	// No ATOMIC_O_TRUNC: without OPEN, the kernel truncates by SETATTR.
	opts.DisabledCapabilities = fuse.CAP_PASSTHROUGH
	return opts
}

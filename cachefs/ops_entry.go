package cachefs

import (
	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Operations on names and attributes.

func (fs *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	return fs.call(func(epoch uint64) error {
		parent, pup, err := fs.nodeUp(h.NodeId, epoch)
		if err != nil {
			return err
		}
		var resp upstream.EntryResp
		if err := fs.rpc(upstream.OpLookup, &upstream.LookupReq{Parent: pup, Name: name}, &resp); err != nil {
			return err
		}
		fs.entered(parent, name, &resp.Entry, epoch, out)
		return nil
	})
}

// entered records a host entry the kernel is being given and fills out.
func (fs *FS) entered(parent *node, name string, e *upstream.Entry, epoch uint64, out *fuse.EntryOut) *node {
	n := fs.nodes.add(parent, name, e.Node, epoch, e.Attr.Mode)
	fs.fillEntry(out, n, &e.Attr)
	return n
}

func (fs *FS) Forget(nodeid, nlookup uint64) {
	up, epoch, refs := fs.nodes.forget(nodeid, nlookup)
	fs.forgets.add(up, epoch, refs)
}

func (fs *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	return fs.call(func(epoch uint64) error {
		n, up, err := fs.nodeUp(in.NodeId, epoch)
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

func (fs *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	return fs.call(func(epoch uint64) error {
		n, up, err := fs.nodeUp(in.NodeId, epoch)
		if err != nil {
			return err
		}
		req := setattrReq(in, up)
		if fh, ok := in.GetFh(); ok && req.Valid&upstream.SetSize != 0 {
			if h := fs.handles.get(fh); h != nil && !h.dir {
				if req.Handle, err = fs.upHandle(h, epoch); err != nil {
					return err
				}
			}
		}
		var resp upstream.AttrResp
		if err := fs.rpc(upstream.OpSetattr, req, &resp); err != nil {
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
	var target []byte
	st := fs.call(func(epoch uint64) error {
		_, up, err := fs.nodeUp(h.NodeId, epoch)
		if err != nil {
			return err
		}
		var resp upstream.ReadlinkResp
		err = fs.rpc(upstream.OpReadlink, &upstream.NodeReq{Node: up}, &resp)
		target = []byte(resp.Target)
		return err
	})
	return target, st
}

func (fs *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	return fs.call(func(epoch uint64) error {
		var r upstream.StatfsResp
		if err := fs.rpc(upstream.OpStatfs, &upstream.Empty{}, &r); err != nil {
			return err
		}
		*out = fuse.StatfsOut{Blocks: r.Blocks, Bfree: r.Bfree, Bavail: r.Bavail, Files: r.Files,
			Ffree: r.Ffree, Bsize: r.Bsize, NameLen: r.NameLen, Frsize: r.Frsize}
		return nil
	})
}

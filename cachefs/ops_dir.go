package cachefs

import (
	"context"
	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Directory reading. One host round trip fetches up to dirBatch entries
// (with attributes, for readdirplus); what does not fit the kernel's
// buffer waits in the handle for the next call at that offset.

const dirBatch = 1024

// dirBuf holds entries fetched but not yet given to the kernel.
type dirBuf struct {
	ents  []upstream.Dirent
	start uint64 // offset at which ents[0] starts
	plus  bool
	eof   bool // no entries follow ents
	epoch uint64
}

func (fs *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	ctx := callerCtx(cancel, &in.InHeader)
	if n := fs.nodes.get(in.NodeId); n != nil && fs.wb != nil {
		if snap, ok := fs.dListing(n); ok {
			out.Fh = fs.handles.add(&handle{node: n, dir: true, epoch: fs.up.Epoch(), snap: snap})
			out.OpenFlags = fs.openFlags(n)
			return fuse.OK
		}
	}
	return fs.call(func(epoch uint64) error {
		n, up, err := fs.nodeUp(ctx, in.NodeId, epoch)
		if err != nil {
			return err
		}
		caching := fs.mayCacheMeta(n)
		out.OpenFlags = fs.openFlags(n)
		if caching {
			h := fs.openSnap(n, up, epoch)
			if h == nil {
				if ok, err := fs.prefetch(ctx, n, up, epoch); err != nil {
					return err
				} else if ok {
					h = fs.openSnap(n, up, epoch)
				}
			}
			if h != nil {
				out.Fh = h.id
				return nil
			}
		}
		var fill *dirFill
		if caching {
			fill = &dirFill{epoch: epoch, dir: up, gen: fs.cache.fence(epoch)}
		}
		var resp upstream.OpenResp
		if err := fs.rpcFor(ctx, epoch, upstream.OpOpendir, &upstream.NodeReq{Node: up}, &resp); err != nil {
			return err
		}
		// The kernel's listing cache is the directory's, shared by its
		// handles: it may only hold snapshot offsets (entry i at i+1),
		// never the host's, or a snapshot handle asked to go on at a
		// host offset would answer end of directory.
		out.OpenFlags &^= fuse.FOPEN_CACHE_DIR
		out.Fh = fs.handles.add(&handle{node: n, dir: true, up: resp.Handle, epoch: epoch, fill: fill})
		return nil
	})
}

func (fs *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(callerCtx(cancel, &in.InHeader), in, out, false)
}

func (fs *FS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(callerCtx(cancel, &in.InHeader), in, out, true)
}

func (fs *FS) readDir(ctx *waitCtx, in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	h := fs.handles.get(in.Fh)
	if h == nil {
		return fuse.EBADF
	}
	h.mu.Lock()
	if h.snap != nil {
		defer h.mu.Unlock()
		fs.readSnap(h, h.snap, in.Offset, out, plus)
		return fuse.OK
	}
	buf := h.buf
	h.buf = nil
	if f := h.fill; f != nil && (f.next != in.Offset || !plus || f.epoch != fs.up.Epoch()) {
		f.abandon(fs) // not one sequential readdirplus from the start
		h.fill = nil
	}
	h.mu.Unlock()
	if buf == nil || buf.start != in.Offset || buf.plus != plus || buf.epoch != fs.up.Epoch() {
		fs.dropDirBuf(buf)
		var st fuse.Status
		if buf, st = fs.fetchDir(ctx, h, in.Offset, plus); !st.Ok() {
			return st
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf = fs.fillDir(h, buf, out)
	return fuse.OK
}

func (fs *FS) fetchDir(ctx context.Context, h *handle, off uint64, plus bool) (*dirBuf, fuse.Status) {
	var buf *dirBuf
	st := fs.withHandle(ctx, h.id, func(_ *handle, up, epoch uint64) error {
		var resp upstream.ReaddirResp
		err := fs.rpcFor(ctx, epoch, upstream.OpReaddir, &upstream.ReaddirReq{Handle: up, Offset: off, Max: dirBatch, Plus: plus}, &resp)
		buf = &dirBuf{ents: resp.Entries, start: off, plus: plus, eof: resp.EOF, epoch: fs.up.Epoch()}
		return err
	})
	return buf, st
}

// fillDir gives the kernel what fits of buf and returns the rest, or
// nil. Needs h.mu.
func (fs *FS) fillDir(h *handle, buf *dirBuf, out *fuse.DirEntryList) *dirBuf {
	rest := fs.fillDirEntries(h, buf, out)
	if f := h.fill; f != nil {
		f.next = rest.start
		switch {
		case len(rest.ents) == 0 && buf.eof:
			f.finish(fs)
			h.fill = nil
		case len(f.names) > maxCachedListing:
			f.abandon(fs)
			h.fill = nil
		}
	}
	if len(rest.ents) == 0 && !buf.eof {
		return nil
	}
	return rest
}

// fillDirEntries gives the kernel what fits of buf; it returns the rest.
func (fs *FS) fillDirEntries(h *handle, buf *dirBuf, out *fuse.DirEntryList) *dirBuf {
	dir := h.node
	for i, e := range buf.ents {
		de := fuse.DirEntry{Name: e.Name, Mode: e.Mode, Ino: e.Ino, Off: e.Off}
		if !buf.plus {
			if !out.AddDirEntry(de) {
				return buf.rest(i)
			}
			continue
		}
		eo := out.AddDirLookupEntry(de)
		if eo == nil {
			return buf.rest(i)
		}
		var n *node
		if e.Entry.Node != 0 {
			n = fs.entered(dir, e.Name, &e.Entry, buf.epoch, eo)
		}
		if h.fill != nil {
			h.fill.gather(fs, e.Name, n, direntAttr(&e))
			if n != nil {
				fs.cache.putAttr(buf.epoch, e.Entry.Node, h.fill.gen, &e.Entry.Attr)
			}
		}
	}
	return buf.rest(len(buf.ents)) // at EOF, answers the final call locally
}

// rest returns buf from entry i on.
func (b *dirBuf) rest(i int) *dirBuf {
	r := *b
	if i > 0 {
		r.start = b.ents[i-1].Off
	}
	r.ents = b.ents[i:]
	return &r
}

// dropDirBuf returns the host references of entries never given to the
// kernel.
func (fs *FS) dropDirBuf(b *dirBuf) {
	if b == nil || !b.plus {
		return
	}
	for _, e := range b.ents {
		if e.Entry.Node != 0 {
			fs.forgets.add(e.Entry.Node, b.epoch, 1)
		}
	}
}

func (fs *FS) ReleaseDir(in *fuse.ReleaseIn) {
	h := fs.handles.get(in.Fh)
	if h == nil {
		return
	}
	h.mu.Lock()
	fs.dropDirBuf(h.buf)
	h.buf = nil
	if h.fill != nil {
		h.fill.abandon(fs)
		h.fill = nil
	}
	snap := h.snap
	h.mu.Unlock()
	if snap != nil { // never opened on the host
		fs.handles.remove(in.Fh)
		fs.releaseSnap(snap)
		return
	}
	fs.release(in.Fh, upstream.OpReleasedir)
}

func (fs *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if h := fs.handles.get(in.Fh); h != nil && h.snap != nil {
		return fuse.OK // nothing of it is pending on the guest
	}
	return fs.Fsync(cancel, in)
}

package cachefs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// File I/O in delegated subtrees goes to the staging copy of the file;
// closing a file that was written queues its contents for write-back.

// openLocal opens n's staging file for a local handle; opens counts it
// already if reserved. Needs w.mu.
func (fs *FS) openLocalLocked(n *node, flags uint32, reserved bool) (*handle, error) {
	f := &stagedFile{fds: fs.wb.fds, name: n.local.staging}
	if ready := n.local.ready; ready != nil {
		n.local.ready = nil
		fs.wb.fds.add(f.name, ready).release()
	} else if err := f.with(func(*os.File) error { return nil }); err != nil {
		return nil, err // opened here, so that a missing staging file fails the open
	}
	if flags&syscall.O_TRUNC != 0 {
		if err := f.Truncate(0); err != nil {
			return nil, err
		}
		n.local.attr.Size = 0
		n.local.attr.Mtime = nowNs()
		fs.wb.seenLocked(n, f)
	}
	if !reserved {
		n.local.opens++
	}
	h := &handle{node: n, flags: flags, lf: f, dirty: flags&syscall.O_TRUNC != 0}
	fs.handles.add(h)
	fs.wb.open[h] = true
	return h, nil
}

// openReplyLocked sets the reply's flags for local handle h: passthrough
// where it can be, else through the daemon (counted as such). Its close
// sends FLUSH: a close of any descriptor must end the process's POSIX
// locks on the file, also those taken through another descriptor after
// this one was opened, and the host holds them. Needs w.mu.
func (fs *FS) openReplyLocked(h *handle, out *fuse.OpenOut) {
	if id, ok := fs.passThroughLocked(h); ok {
		// Without KEEP_CACHE the kernel drops the inode's page cache,
		// which passthrough does not use and so would not keep current.
		out.Fh, out.OpenFlags, out.BackingID = h.id, fuse.FOPEN_PASSTHROUGH, id
		return
	}
	h.plain = true
	fs.wb.plainOpenLocked(h.node)
	out.Fh, out.OpenFlags = h.id, fuse.FOPEN_KEEP_CACHE
}

// dOpen opens a file of a delegated subtree: locally if the guest has
// its contents or it is opened for writing (then its contents are copied
// from the host first, unless truncated). ok is false for read-only
// opens of files the host has: those read through the host's data, and
// are counted as open not passthrough (countPlain) already.
func (fs *FS) dOpen(n *node, flags uint32, out *fuse.OpenOut) (fuse.Status, bool) {
	w := fs.wb
	writing := flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
	w.mu.Lock()
	has := n.local != nil && n.local.staging != ""
	if !has && !writing {
		// Read from the host: counted now, under the same hold as the
		// check, so that no writer's open is passed through meanwhile.
		w.plainOpenLocked(n)
		w.mu.Unlock()
		return fuse.OK, false
	}
	w.mu.Unlock()
	if err := fs.localize(n, flags&syscall.O_TRUNC == 0); err != nil {
		return fs.status(err), true
	}
	defer w.mu.Unlock()
	if n.local.staging == "" { // truncating: no contents needed
		n.local.staging = w.newStagingLocked()
	}
	h, err := fs.openLocalLocked(n, flags, false)
	if err != nil {
		return fs.status(err), true
	}
	fs.openReplyLocked(h, out)
	return fuse.OK, true
}

// localHandle returns the handle fh if it is a local one.
func (fs *FS) localHandle(fh uint64) *handle {
	if h := fs.handles.get(fh); h != nil && h.lf != nil {
		return h
	}
	return nil
}

func (fs *FS) lRead(h *handle, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	return fs.readAt(h.lf, in, buf)
}

func (fs *FS) readAt(r io.ReaderAt, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	n, err := r.ReadAt(buf[:min(int(in.Size), len(buf))], int64(in.Offset))
	if n == 0 && err != nil && !errors.Is(err, io.EOF) {
		return nil, fs.status(err)
	}
	return fuse.ReadResultData(buf[:n]), fuse.OK
}

// stagedRead serves a read through a host handle of a file whose contents
// the guest has since taken (a writer opened it meanwhile): the staging
// copy is the file now, and the host may not have it yet. ok is false
// for files the guest has no copy of.
func (fs *FS) stagedRead(in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status, bool) {
	h := fs.handles.get(in.Fh)
	if fs.wb == nil || h == nil {
		return nil, fuse.OK, false
	}
	w := fs.wb
	w.mu.Lock()
	l := h.node.local
	if l == nil || l.staging == "" {
		w.mu.Unlock()
		return nil, fuse.OK, false
	}
	f, err := openPlain(filepath.Join(w.dir, l.staging), os.O_RDONLY, 0)
	w.mu.Unlock()
	if err != nil {
		return nil, fs.status(err), true
	}
	defer f.Close()
	r, st := fs.readAt(f, in, buf)
	return r, st, true
}

func (fs *FS) lWrite(h *handle, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	n, err := h.lf.WriteAt(data, int64(in.Offset))
	if err != nil {
		return uint32(n), fs.status(err)
	}
	w := fs.wb
	w.mu.Lock()
	defer w.mu.Unlock()
	l := h.node.local
	end := uint64(in.Offset) + uint64(n)
	if end > l.attr.Size {
		l.attr.Size = end
	}
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 && killOnWrite(&l.attr, in.Caller.Uid, in.Caller.Gid) {
		fs.queueModeLocked(h.node)
	}
	l.attr.Mtime = nowNs()
	l.attr.Ctime = l.attr.Mtime
	h.dirty = true
	w.stats.LocalWrites++
	w.seenLocked(h.node, h.lf)
	return uint32(n), fuse.OK
}

// queueDataLocked queues h's file contents for write-back if it was
// written since. Needs w.mu.
func (fs *FS) queueDataLocked(h *handle) {
	if !h.dirty {
		return
	}
	h.dirty = false
	p, ok := fs.nodes.path(h.node)
	if !ok {
		return // unlinked: nothing to write back
	}
	l := h.node.local
	op := upstream.WBOp{Kind: upstream.WBWrite, Path: p, Atime: l.attr.Atime, Mtime: l.attr.Mtime,
		Valid: upstream.SetAtime | upstream.SetMtime}
	fs.wb.addLocked(op, l.staging, h.node)
}

// lFlush queues what h wrote for write-back at close(2), which waits for
// FLUSH (RELEASE comes later, asynchronously): a flush that starts after
// close returns finds it queued.
func (fs *FS) lFlush(h *handle) {
	w := fs.wb
	w.mu.Lock()
	defer w.mu.Unlock()
	fs.queueWrittenLocked(h)
}

// queueWrittenLocked queues what h wrote since it was last queued. The
// kernel's writes through a passthrough handle are not seen: the staging
// file as queued is kept (h.flushed), and the handle is queued again if
// the file changed since. Needs w.mu.
func (fs *FS) queueWrittenLocked(h *handle) {
	fs.wb.refreshLocked(h.node)
	l := h.node.local
	if h.pt && !h.dirty && h.flushedOK && (!l.seenValid || l.seen != h.flushed) {
		h.dirty = true // written (through it or a shared descriptor) since
	}
	if !h.dirty {
		return
	}
	fs.queueDataLocked(h)
	if h.pt && l.seenValid {
		h.flushed, h.flushedOK = l.seen, true
	}
}

func (fs *FS) lRelease(h *handle) {
	w := fs.wb
	w.mu.Lock()
	defer w.mu.Unlock()
	fs.queueWrittenLocked(h)
	delete(w.open, h)
	switch {
	case h.pt:
		fs.ptReleaseLocked(h)
	case h.plain:
		h.plain = false
		w.plainCloseLocked(h.node)
	}
	l := h.node.local
	l.opens--
	if l.pending == 0 && l.opens == 0 && l.children == nil {
		w.dropStagingLocked(h.node)
	}
}

// lFsync makes h's contents durable in the guest and waits until the
// host has them.
func (fs *FS) lFsync(h *handle) fuse.Status {
	w := fs.wb
	w.mu.Lock()
	fs.queueWrittenLocked(h)
	w.mu.Unlock()
	if err := h.lf.Sync(); err != nil {
		return fs.status(err)
	}
	if err := w.sync(); err != nil {
		return fs.status(err)
	}
	if failed := w.wait(); len(failed) > 0 {
		return failureStatus(failed)
	}
	return fuse.OK
}

// failureStatus is the errno fsync reports for write-back failures: the
// host's lack of space as such (the write-back is stalled, not lost),
// else EIO.
func failureStatus(failed []Failure) fuse.Status {
	for _, f := range failed {
		for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
			if f.Errno == e.Error() {
				return fuse.Status(e)
			}
		}
	}
	return fuse.EIO
}

// lLseek serves SEEK_DATA and SEEK_HOLE on a local file.
func (fs *FS) lLseek(h *handle, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	err := h.lf.with(func(f *os.File) error {
		off, err := syscall.Seek(int(f.Fd()), int64(in.Offset), int(in.Whence))
		out.Offset = uint64(off)
		return err
	})
	return fs.status(err)
}

// dCreateOpen creates and opens a file in a delegated directory.
func (fs *FS) dCreateOpen(parent *node, name string, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	n, st := fs.dCreate(parent, name, sIFREG|in.Mode&07777, "", caller(&in.InHeader), &out.EntryOut, true)
	if !st.Ok() {
		return st
	}
	w := fs.wb
	w.mu.Lock()
	defer w.mu.Unlock()
	h, err := fs.openLocalLocked(n, in.Flags&^syscall.O_TRUNC, true)
	if err != nil {
		n.local.opens--
		return fs.status(err)
	}
	fs.openReplyLocked(h, &out.OpenOut)
	h.dirty = true // even empty, its contents and times go to the host
	fs.nodes.setNoCaps(n, true)
	return fuse.OK
}

// lFallocate allocates in a local file.
func (fs *FS) lFallocate(h *handle, in *fuse.FallocateIn) fuse.Status {
	var fi os.FileInfo
	err := h.lf.with(func(f *os.File) error {
		if err := syscall.Fallocate(int(f.Fd()), in.Mode, int64(in.Offset), int64(in.Length)); err != nil {
			return err
		}
		var err error
		fi, err = f.Stat()
		return err
	})
	if err != nil {
		return fs.status(err)
	}
	w := fs.wb
	w.mu.Lock()
	defer w.mu.Unlock()
	h.node.local.attr.Size = uint64(fi.Size())
	h.dirty = true
	w.seenLocked(h.node, h.lf)
	return fuse.OK
}

//go:build linux

package upstream

import (
	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// Open flags never passed to the host open: the guest kernel handled
// creation and terminal semantics; O_DIRECT alignment is the host's.
const stripOpenFlags = unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY | unix.O_NOFOLLOW | unix.O_DIRECT

const writeFlags = unix.O_WRONLY | unix.O_RDWR | unix.O_TRUNC | unix.O_APPEND

func (ss *session) open(req *OpenReq, resp *OpenResp) error {
	flags := int(req.Flags) &^ stripOpenFlags
	if flags&writeFlags != 0 {
		if err := ss.writable(); err != nil {
			return err
		}
	}
	return ss.withNode(req.Node, func(n *node, fd int) error {
		if n.fmt != unix.S_IFREG {
			return unix.EINVAL
		}
		hfd, err := ss.reopen(n, fd, flags)
		if err != nil {
			return err
		}
		resp.Handle = ss.newFile(n, hfd, flags, false)
		return nil
	})
}

// newFile registers an open fd as a handle; the fd joins the cache and
// reopens without O_TRUNC if evicted.
func (ss *session) newFile(n *node, fd, flags int, dir bool) uint64 {
	f := &openFile{node: n, flags: flags &^ unix.O_TRUNC, dir: dir}
	ss.srv.fds.add(f, fd).release()
	return ss.addHandle(f)
}

func (ss *session) create(req *CreateReq, resp *CreateResp) error {
	if err := ss.writable(); err != nil {
		return err
	}
	flags := int(req.Flags)&^stripOpenFlags | unix.O_CREAT | unix.O_NOFOLLOW
	if req.Flags&unix.O_EXCL != 0 {
		flags |= unix.O_EXCL
	}
	return ss.withDirName(req.Parent, req.Name, func(dir *node, dfd int) error {
		ss.mark(dir, req.Name, invalidation.Create, invalidation.Attrib, invalidation.Modify)
		host, kept := ss.srv.splitMode(unix.S_IFREG, req.Mode&07777)
		hfd, created, err := openCreate(dfd, req.Name, flags|unix.O_CLOEXEC, host)
		if err != nil {
			return err
		}
		resp.Created = created
		if created && kept != 0 {
			if err := ss.srv.writeSetid(hostfs.FDPath(hfd), kept); err != nil {
				unix.Close(hfd)
				return err
			}
		}
		e, err := ss.created(dir, dfd, req.Name, req.Caller)
		if err != nil {
			unix.Close(hfd)
			return err
		}
		n, _ := ss.nodes.get(e.Node)
		resp.Entry = e
		resp.Handle = ss.newFile(n, hfd, flags&^(unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW), false)
		return nil
	})
}

func (ss *session) read(req *ReadReq, resp *DataResp) error {
	if req.Size > MaxIO {
		return unix.EINVAL
	}
	return ss.withFile(req.Handle, func(_ *openFile, fd int) error {
		return preadResp(fd, req.Offset, req.Size, resp)
	})
}

// preadResp reads up to size bytes at off into resp.
func preadResp(fd int, off int64, size uint32, resp *DataResp) error {
	buf := make([]byte, size)
	n, err := unix.Pread(fd, buf, off)
	resp.Data = buf[:max(n, 0)]
	return err
}

// readNode reads a regular file by node, opening it read-only for this
// read alone: no handle outlives the request.
func (ss *session) readNode(req *ReadNodeReq, resp *DataResp) error {
	if req.Size > MaxIO {
		return unix.EINVAL
	}
	return ss.withReadOnly(req.Node, func(rfd int) error {
		return preadResp(rfd, req.Offset, req.Size, resp)
	})
}

// withReadOnly runs f with a read-only descriptor of regular file id,
// opened for f alone (reopen: by the backend's own way).
func (ss *session) withReadOnly(id uint64, f func(rfd int) error) error {
	return ss.withNode(id, func(n *node, fd int) error {
		if n.fmt != unix.S_IFREG {
			return unix.EINVAL
		}
		rfd, err := ss.reopen(n, fd, unix.O_RDONLY)
		if err != nil {
			return err
		}
		defer unix.Close(rfd)
		return f(rfd)
	})
}

// readNodes reads small regular files whole by node, as readNode each,
// until the reply holds MaxIO bytes; what cannot be read is left out
// for the guest to read on its own.
func (ss *session) readNodes(req *ReadNodesReq, resp *ReadNodesResp) error {
	if len(req.Nodes) > MaxReadNodes || req.Max > MaxIO {
		return unix.EINVAL
	}
	budget := MaxIO
	for _, id := range req.Nodes {
		f, err := ss.readWhole(id, req.Max)
		if err != nil || len(f.Data) > budget {
			continue
		}
		budget -= len(f.Data)
		resp.Files = append(resp.Files, f)
	}
	return nil
}

// readWhole reads node id whole if it is a regular file of at most max
// bytes.
func (ss *session) readWhole(id uint64, max uint32) (NodeData, error) {
	f := NodeData{Node: id}
	err := ss.withReadOnly(id, func(rfd int) error {
		var st unix.Stat_t
		if err := unix.Fstat(rfd, &st); err != nil {
			return err
		}
		if st.Size > int64(max) {
			return unix.EFBIG
		}
		var data DataResp
		if err := preadResp(rfd, 0, uint32(st.Size), &data); err != nil {
			return err
		}
		if int64(len(data.Data)) != st.Size {
			return unix.EAGAIN // changed while read: the guest reads it itself
		}
		f.Size, f.Mtime, f.Data = st.Size, st.Mtim.Nano(), data.Data
		return nil
	})
	return f, err
}

func (ss *session) write(req *WriteReq, resp *WriteResp) error {
	if err := ss.writable(); err != nil {
		return err
	}
	return ss.withFile(req.Handle, func(f *openFile, fd int) error {
		if req.Flags&WriteKillSuidgid != 0 {
			if err := ss.killSetidOnWrite(fd, req.Gid); err != nil {
				return err
			}
		}
		ss.markNode(f.node, invalidation.Modify)
		n, err := unix.Pwrite(fd, req.Data, req.Offset)
		resp.Written = uint32(max(n, 0))
		return err
	})
}

func (ss *session) fsync(req *FsyncReq, _ *Empty) error {
	return ss.withFile(req.Handle, func(_ *openFile, fd int) error {
		if req.Datasync {
			return unix.Fdatasync(fd)
		}
		return unix.Fsync(fd)
	})
}

func (ss *session) releaseOp(req *HandleReq, _ *Empty) error {
	if f, err := ss.handle(req.Handle); err == nil {
		ss.nodes.releasedLocks(f)
	}
	ss.release(req.Handle)
	return nil
}

func (ss *session) fallocate(req *FallocateReq, _ *Empty) error {
	if err := ss.writable(); err != nil {
		return err
	}
	return ss.withFile(req.Handle, func(_ *openFile, fd int) error {
		return unix.Fallocate(fd, req.Mode, req.Offset, req.Length)
	})
}

func (ss *session) lseek(req *LseekReq, resp *LseekResp) error {
	return ss.withFile(req.Handle, func(_ *openFile, fd int) (err error) {
		resp.Offset, err = unix.Seek(fd, req.Offset, int(req.Whence))
		return err
	})
}

// openCreate opens name in dfd with O_CREAT, reporting whether it made a
// new file: it tries O_EXCL first unless the caller asked for it.
func openCreate(dfd int, name string, flags int, mode uint32) (int, bool, error) {
	if flags&unix.O_EXCL != 0 {
		fd, err := unix.Openat(dfd, name, flags, mode)
		return fd, err == nil, err
	}
	fd, err := unix.Openat(dfd, name, flags|unix.O_EXCL, mode)
	if err != unix.EEXIST {
		return fd, err == nil, err
	}
	fd, err = openExisting(dfd, name, flags&^(unix.O_CREAT|unix.O_NOFOLLOW))
	return fd, false, err
}

// openExisting opens name in dfd if it is a regular file, as open does:
// opening a fifo would block the server, a device reach beyond the
// export.
func openExisting(dfd int, name string, flags int) (int, error) {
	pfd, err := hostfs.OpenNode(dfd, name)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return -1, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return unix.Open(hostfs.FDPath(pfd), flags, 0)
	case unix.S_IFDIR:
		return -1, unix.EISDIR
	case unix.S_IFLNK:
		return -1, unix.ELOOP
	}
	return -1, unix.EINVAL
}

//go:build linux

package upstream

import (
	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// Operations that change the directory tree. Each resolves its directory
// node to an fd and works on single names beneath it, so nothing a guest
// sends can reach outside the export.

// created looks up a name just made in dir, hands it to the caller's
// ownership and returns its entry.
func (ss *session) created(dir *node, dfd int, name string, c Caller) (Entry, error) {
	if err := ss.chownNew(dfd, name, c); err != nil {
		return Entry{}, err
	}
	return ss.lookupIn(dir, dfd, name)
}

// chownNew gives a new file its creator's uid and gid (or the directory's
// gid where it is setgid), as the guest kernel would have.
func (ss *session) chownNew(dfd int, name string, c Caller) error {
	var dst, st unix.Stat_t
	if err := unix.Fstat(dfd, &dst); err != nil {
		return err
	}
	gid := c.Gid
	if dst.Mode&unix.S_ISGID != 0 {
		gid = dst.Gid
	}
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Uid == c.Uid && st.Gid == gid {
		return nil // as made: no fd needed
	}
	fd, err := hostfs.OpenNode(dfd, name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	return ss.setOwner(fd, &st, c.Uid, gid)
}

// mknod makes regular files, fifos and sockets, and the placeholders of
// devices (server_dev.go): a real device node would give a guest the
// host's devices.
func (ss *session) mknod(req *MknodReq, resp *EntryResp) error {
	if err := ss.writable(); err != nil {
		return err
	}
	switch req.Mode & unix.S_IFMT {
	case 0, unix.S_IFREG, unix.S_IFIFO, unix.S_IFSOCK, unix.S_IFCHR, unix.S_IFBLK:
	default:
		return unix.EPERM
	}
	fmt := req.Mode & unix.S_IFMT
	if fmt == 0 {
		fmt = unix.S_IFREG
	}
	host, kept := ss.srv.splitMode(fmt, req.Mode&07777)
	return ss.withDirName(req.Parent, req.Name, func(dir *node, fd int) (err error) {
		ss.mark(dir, req.Name, invalidation.Create, invalidation.Attrib)
		if isDevice(fmt) {
			err = ss.srv.mkdev(fd, req.Name, fmt, req.Mode&0777, req.Rdev)
		} else {
			err = unix.Mknodat(fd, req.Name, fmt|host, int(req.Rdev))
		}
		if err != nil {
			return err
		}
		if err := ss.srv.keepSetidAt(fd, req.Name, kept); err != nil {
			return err
		}
		resp.Entry, err = ss.created(dir, fd, req.Name, req.Caller)
		return err
	})
}

func (ss *session) mkdir(req *MknodReq, resp *EntryResp) error {
	if err := ss.writable(); err != nil {
		return err
	}
	return ss.withDirName(req.Parent, req.Name, func(dir *node, fd int) (err error) {
		ss.mark(dir, req.Name, invalidation.Create, invalidation.Attrib)
		if err := unix.Mkdirat(fd, req.Name, req.Mode); err != nil {
			return err
		}
		resp.Entry, err = ss.created(dir, fd, req.Name, req.Caller)
		return err
	})
}

func (ss *session) symlink(req *SymlinkReq, resp *EntryResp) error {
	if err := ss.writable(); err != nil {
		return err
	}
	return ss.withDirName(req.Parent, req.Name, func(dir *node, fd int) (err error) {
		ss.mark(dir, req.Name, invalidation.Create, invalidation.Attrib)
		if err := unix.Symlinkat(req.Target, fd, req.Name); err != nil {
			return err
		}
		resp.Entry, err = ss.created(dir, fd, req.Name, req.Caller)
		return err
	})
}

func (ss *session) link(req *LinkReq, resp *EntryResp) error {
	if err := ss.writable(); err != nil {
		return err
	}
	return ss.withNode(req.Node, func(n *node, nfd int) error {
		if n.fmt == unix.S_IFDIR {
			return unix.EPERM
		}
		return ss.withDirName(req.NewParent, req.NewName, func(dir *node, dfd int) (err error) {
			ss.mark(dir, req.NewName, invalidation.Create)
			if err := linkFD(nfd, n, dfd, req.NewName); err != nil {
				return err
			}
			resp.Entry, err = ss.lookupIn(dir, dfd, req.NewName)
			return err
		})
	})
}

// linkFD makes a new name for the inode behind an O_PATH fd. Through
// /proc it needs no capability; a symlink is linked itself, not followed
// past (linkat on an O_PATH symlink fd reaches the symlink inode).
func linkFD(fd int, n *node, dfd int, name string) error {
	if n.fmt == unix.S_IFLNK {
		return unix.Linkat(fd, "", dfd, name, unix.AT_EMPTY_PATH)
	}
	return unix.Linkat(unix.AT_FDCWD, hostfs.FDPath(fd), dfd, name, unix.AT_SYMLINK_FOLLOW)
}

func (ss *session) unlink(req *UnlinkReq, resp *ChangedResp) error {
	return ss.remove(req, 0, resp)
}

func (ss *session) rmdir(req *UnlinkReq, resp *ChangedResp) error {
	return ss.remove(req, unix.AT_REMOVEDIR, resp)
}

// add lists the known nodes among ns in resp.
func (resp *ChangedResp) add(ns ...*node) {
	for _, n := range ns {
		if n != nil {
			resp.Nodes = append(resp.Nodes, n.id)
		}
	}
}

func (ss *session) remove(req *UnlinkReq, flags int, resp *ChangedResp) error {
	if err := ss.writable(); err != nil {
		return err
	}
	return ss.withDirName(req.Parent, req.Name, func(dir *node, fd int) error {
		ss.mark(dir, req.Name, invalidation.Delete)
		victim := ss.victim(fd, req.Name)
		ss.unlinking(victim)
		if err := unix.Unlinkat(fd, req.Name, flags); err != nil {
			return err
		}
		resp.add(victim)
		return nil
	})
}

// victim returns the known node that name in dir holds, if any, before
// an operation that may remove its last name.
func (ss *session) victim(dfd int, name string) *node {
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return nil
	}
	return ss.nodes.find(st.Dev, st.Ino)
}

// unlinking pins the open files of a node that may lose its last name,
// before it does: their fds must outlive eviction, as they could not be
// reopened.
func (ss *session) unlinking(n *node) {
	if n == nil || ss.nodes.addOpen(n, 0) == 0 {
		return
	}
	ss.pinOpenFiles(n)
}

// renameFlags checks a guest's renameat2 flags. RENAME_WHITEOUT would
// leave a whiteout, a 0:0 character device, where the server may make
// one; bits unknown here may mean more to a later kernel.
func renameFlags(flags uint32) (uint, error) {
	if flags&^(RenameNoReplace|RenameExchange) != 0 {
		return 0, unix.EINVAL
	}
	return uint(flags), nil
}

func (ss *session) rename(req *RenameReq, resp *ChangedResp) error {
	if err := ss.writable(); err != nil {
		return err
	}
	flags, err := renameFlags(req.Flags)
	if err != nil {
		return err
	}
	return ss.withDirName(req.Parent, req.Name, func(odir *node, ofd int) error {
		return ss.withDirName(req.NewParent, req.NewName, func(ndir *node, nfd int) error {
			moving := ss.victim(ofd, req.Name)
			replaced := ss.victim(nfd, req.NewName)
			ss.mark(odir, req.Name, invalidation.MoveFrom, invalidation.MoveTo)
			ss.mark(ndir, req.NewName, invalidation.MoveTo, invalidation.MoveFrom) // both ways for RENAME_EXCHANGE
			if req.Flags&RenameExchange == 0 {
				ss.unlinking(replaced)
			}
			if err := unix.Renameat2(ofd, req.Name, nfd, req.NewName, flags); err != nil {
				return err
			}
			if moving != nil {
				ss.nodes.moved(moving, ndir, req.NewName)
			}
			if replaced != nil && req.Flags&RenameExchange != 0 {
				ss.nodes.moved(replaced, odir, req.Name)
			}
			resp.add(moving, replaced)
			return nil
		})
	})
}

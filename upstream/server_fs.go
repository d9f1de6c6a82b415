//go:build linux

package upstream

import (
	"errors"
	"strconv"
	"strings"

	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// ownerXattr holds "uid:gid" set by the guest when the server may not
// chown (ServerOptions.OwnerXattrs).
const ownerXattr = "user.cachefs.owner"

// nodeFD returns an O_PATH fd for n with a reference held.
func (ss *session) nodeFD(n *node) (*fdRef, error) {
	if n == ss.root {
		if !ss.srv.rootRef.acquire() {
			return nil, unix.ESTALE // the server is closed
		}
		return ss.srv.rootRef, nil
	}
	if r := ss.srv.fds.get(n); r != nil {
		return r, nil
	}
	fd, err := ss.openNode(n)
	if err == unix.ESTALE {
		fd, err = ss.openViaFile(n)
	}
	if err != nil {
		return nil, err
	}
	return ss.srv.fds.add(n, fd), nil
}

// openNode opens n by file handle, or else through its parent and name,
// checking that the name still holds the same inode.
func (ss *session) openNode(n *node) (int, error) {
	if n.handle != nil {
		fd, err := ss.openByHandle(n)
		if err == nil {
			return fd, nil
		}
		if errors.Is(err, unix.ESTALE) {
			return -1, unix.ESTALE
		}
	}
	fd, err := ss.inParent(n, hostfs.OpenNode)
	if err != nil {
		if err == unix.ENOENT {
			err = unix.ESTALE
		}
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != n.dev || st.Ino != n.ino {
		unix.Close(fd)
		return -1, unix.ESTALE
	}
	return fd, nil
}

// openViaFile opens n through the fd of one of its open files: the way
// left to reach a file whose last name is gone.
func (ss *session) openViaFile(n *node) (int, error) {
	for _, f := range ss.openFilesOf(n) {
		if r := ss.heldFileFD(f); r != nil {
			defer r.release()
			return hostfs.Reopen(r.fd, unix.O_PATH)
		}
	}
	return -1, unix.ESTALE
}

// openFilesOf returns n's open files.
func (ss *session) openFilesOf(n *node) []*openFile {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []*openFile
	for _, f := range ss.handles {
		if f.node == n {
			out = append(out, f)
		}
	}
	return out
}

// openByHandle opens n by its file handle, with the export root as the
// mount fd.
func (ss *session) openByHandle(n *node) (int, error) {
	r, err := ss.nodeFD(ss.root)
	if err != nil {
		return -1, err
	}
	defer r.release()
	fd, err := ss.srv.ident.Open(r.fd, n.handle)
	if err != nil {
		return -1, err
	}
	if !ss.srv.beneath(fd) {
		unix.Close(fd)
		return -1, unix.EXDEV // moved out by the host: not to be reached by handle
	}
	return fd, nil
}

// beneath reports whether fd's inode is (still) inside the export: a
// handle reaches an inode wherever the host moved it. Where its path is
// too long to tell, it is not trusted; the caller resolves it by name.
func (s *Server) beneath(fd int) bool {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlink(hostfs.FDPath(fd), buf)
	if err != nil || n >= len(buf) || s.rootPath == "" {
		return false
	}
	p := string(buf[:n])
	return p == s.rootPath || strings.HasPrefix(p, s.rootPath+"/") || s.rootPath == "/"
}

// heldFileFD returns f's fd with a reference held if the cache has it,
// or else a pin (no name may be left to reopen it by); else nil.
func (ss *session) heldFileFD(f *openFile) *fdRef {
	if r := ss.srv.fds.get(f); r != nil {
		return r
	}
	if r := f.pinned.Load(); r != nil && r.acquire() {
		return r
	}
	return nil
}

// fileFD returns the fd of an open file with a reference held,
// reopening it if it was evicted.
func (ss *session) fileFD(f *openFile) (*fdRef, error) {
	if r := ss.heldFileFD(f); r != nil {
		return r, nil
	}
	nr, err := ss.nodeFD(f.node)
	if err != nil {
		return nil, err
	}
	defer nr.release()
	fd, err := ss.reopen(f.node, nr.fd, f.flags)
	if err != nil {
		return nil, err
	}
	return ss.srv.fds.add(f, fd), nil
}

// reopen opens the inode of n, whose node fd is fd, with flags: through
// fd's /proc link with file handles, through n's parent and name (the
// inode checked) with the portable backend, as macOS must, so that the
// Linux tests run that path too. A directory is reopened through
// itself ("." beneath its fd), on every backend.
func (ss *session) reopen(n *node, fd, flags int) (int, error) {
	if n.fmt == unix.S_IFDIR {
		return unix.Openat(fd, ".", flags|unix.O_CLOEXEC, 0)
	}
	if ss.srv.ident.Kind() != hostfs.Portable {
		return hostfs.Reopen(fd, flags)
	}
	return ss.inParent(n, func(dfd int, name string) (int, error) {
		return hostfs.ReopenAt(dfd, name, flags, n.dev, n.ino)
	})
}

// inParent runs open with the descriptor of n's parent and n's name in
// it: how a node is reached again without a file handle.
func (ss *session) inParent(n *node, open func(dfd int, name string) (int, error)) (int, error) {
	parent, name := ss.nodes.where(n)
	if parent == nil {
		return -1, unix.ESTALE
	}
	pr, err := ss.nodeFD(parent)
	if err != nil {
		return -1, err
	}
	defer pr.release()
	return open(pr.fd, name)
}

// statNode returns n's attributes.
func (ss *session) statNode(n *node) (Attr, error) {
	r, err := ss.nodeFD(n)
	if err != nil {
		return Attr{}, err
	}
	defer r.release()
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		return Attr{}, err
	}
	return ss.attrOf(r.fd, &st), nil
}

// attrOf converts a stat, applying ownership kept in xattrs. fd is an
// O_PATH fd of the file, or -1 when unknown.
func (ss *session) attrOf(fd int, st *unix.Stat_t) Attr {
	a := Attr{Ino: st.Ino, Size: uint64(st.Size), Blocks: uint64(st.Blocks),
		Atime: unix.TimespecToNsec(st.Atim), Mtime: unix.TimespecToNsec(st.Mtim),
		Ctime: unix.TimespecToNsec(st.Ctim), Mode: st.Mode, Nlink: uint32(st.Nlink),
		Uid: st.Uid, Gid: st.Gid, Rdev: uint32(st.Rdev), Blksize: uint32(st.Blksize)}
	if fd >= 0 {
		ss.srv.summarize(&a, hostfs.FDPath(fd), true)
	}
	if ss.srv.ownerXattr && fd >= 0 && st.Mode&unix.S_IFMT != unix.S_IFLNK {
		a.Uid, a.Gid = ss.readOwner(fd, a.Uid, a.Gid)
	}
	return a
}

func (ss *session) readOwner(fd int, uid, gid uint32) (uint32, uint32) {
	var buf [32]byte
	n, err := hostfs.Getxattr(fd, ownerXattr, buf[:])
	if err != nil {
		return uid, gid
	}
	u, g, ok := strings.Cut(string(buf[:n]), ":")
	uu, err1 := strconv.ParseUint(u, 10, 32)
	gg, err2 := strconv.ParseUint(g, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return uid, gid
	}
	return uint32(uu), uint32(gg)
}

// setOwner changes ownership, by chown or in the owner xattr. uid or gid
// of ^0 leaves that one unchanged.
func (ss *session) setOwner(fd int, st *unix.Stat_t, uid, gid uint32) error {
	if !ss.srv.ownerXattr {
		return unix.Fchownat(fd, "", int(int32(uid)), int(int32(gid)), unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil // no user xattrs on symlinks; they keep the server's owner
	}
	cu, cg := ss.readOwner(fd, st.Uid, st.Gid)
	if uid == ^uint32(0) {
		uid = cu
	}
	if gid == ^uint32(0) {
		gid = cg
	}
	v := strconv.FormatUint(uint64(uid), 10) + ":" + strconv.FormatUint(uint64(gid), 10)
	return hostfs.Setxattr(fd, ownerXattr, []byte(v), 0)
}

// lookupIn finds name in parent and returns its entry, taking a guest
// reference on the node.
func (ss *session) lookupIn(parent *node, pfd int, name string) (Entry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Entry{}, err
	}
	return ss.entryFor(parent, pfd, name, &st)
}

func (ss *session) entryFor(parent *node, pfd int, name string, st *unix.Stat_t) (Entry, error) {
	n := ss.nodes.ref(parent, name, st, ss.srv.ident.Key(pfd, name))
	a := ss.attrOf(-1, st)
	switch {
	case ss.srv.ownerXattr && st.Mode&unix.S_IFMT != unix.S_IFLNK:
		if r, err := ss.nodeFD(n); err == nil {
			a = ss.attrOf(r.fd, st)
			r.release()
		}
	default:
		// By name rather than by an fd of its own, so a listing costs
		// one call per file; llistxattr does not follow name, which
		// holds what st says unless the host just replaced it (then
		// the summary is the new file's, like a stat racing a rename).
		ss.srv.summarize(&a, hostfs.FDPath(pfd)+"/"+name, false)
	}
	return Entry{Node: n.id, Attr: a}, nil
}

//go:build linux

package upstream

import (
	"os"

	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// Write-back ops of whole trees (FeatTreeWB), for a guest whose changes
// live in an overlay's upper directory: removing a subtree, moving onto
// a name whatever is there, special files, a file's whole set of
// extended attributes, and creates that replace what is in their way.
// Like the others, each is idempotent.

// applyTree applies the FeatTreeWB kinds.
func (ss *session) applyTree(w *dirWalker, dfd int, name string, op *WBOp) error {
	switch op.Kind {
	case WBMknod:
		return ss.applyMknod(dfd, name, op)
	case WBRemoveTree:
		ss.markPath(dfd, name, invalidation.Delete)
		w.stale = true
		return removeTree(dfd, name)
	case WBMoveOver:
		return ss.applyMoveOver(w, dfd, name, op)
	case WBXattrs:
		ss.markPath(dfd, name, invalidation.Attrib)
		return applyXattrs(dfd, name, op.Data)
	}
	return unix.EINVAL
}

// clearFor removes what is at name unless op, a create with WBReplace,
// would keep it.
func (ss *session) clearFor(w *dirWalker, dfd int, name string, op *WBOp) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return err
	}
	if keeps(dfd, name, op, &st) {
		return nil
	}
	ss.markPath(dfd, name, invalidation.Delete)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		w.stale = true
	}
	return removeTree(dfd, name)
}

// keeps reports whether a create op keeps the file st found at name:
// never one with another name, which the create must not change.
func keeps(dfd int, name string, op *WBOp, st *unix.Stat_t) bool {
	fmt := st.Mode & unix.S_IFMT
	if fmt != unix.S_IFDIR && st.Nlink != 1 {
		return false
	}
	switch op.Kind {
	case WBMkdir:
		return fmt == unix.S_IFDIR
	case WBCreate:
		return fmt == unix.S_IFREG
	case WBSymlink:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(dfd, name, buf)
		return fmt == unix.S_IFLNK && err == nil && string(buf[:n]) == op.Target
	case WBMknod:
		if want := op.Mode & unix.S_IFMT; isDevice(want) {
			return isDevAt(dfd, name, want, uint32(op.Size))
		}
		return fmt == op.Mode&unix.S_IFMT
	}
	return true
}

// removeTree removes name in dfd, and everything under it if it is a
// directory, following no symlink. A missing name is no error.
func removeTree(dfd int, name string) error {
	err := unix.Unlinkat(dfd, name, 0)
	if err != unix.EISDIR {
		if err == unix.ENOENT {
			return nil
		}
		return err
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	names, err := d.Readdirnames(-1)
	for _, n := range names {
		if err == nil {
			err = removeTree(fd, n)
		}
	}
	d.Close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}

// applyMknod makes a fifo or socket, or the placeholder of a device
// (server_dev.go) whose number is op.Size, as mknod does.
func (ss *session) applyMknod(dfd int, name string, op *WBOp) error {
	fmt := op.Mode & unix.S_IFMT
	if isDevice(fmt) {
		return ss.applyDevice(dfd, name, op)
	}
	if fmt != unix.S_IFIFO && fmt != unix.S_IFSOCK {
		return unix.EPERM
	}
	ss.markPath(dfd, name, invalidation.Create, invalidation.Attrib)
	host, kept := ss.srv.splitMode(fmt, op.Mode&07777)
	err := unix.Mknodat(dfd, name, fmt|host, 0)
	if err == nil {
		err = ss.srv.keepSetidAt(dfd, name, kept)
	} else if err == unix.EEXIST {
		err = isType(dfd, name, fmt)
	}
	return ss.applyOwner(dfd, name, op, err)
}

// applyDevice makes the placeholder of the device op stands for; one
// of the same device already there is kept.
func (ss *session) applyDevice(dfd int, name string, op *WBOp) error {
	fmt, rdev := op.Mode&unix.S_IFMT, uint32(op.Size)
	if uint64(rdev) != op.Size {
		return unix.EINVAL
	}
	ss.markPath(dfd, name, invalidation.Create, invalidation.Attrib)
	err := ss.srv.mkdev(dfd, name, fmt, op.Mode&0777, rdev)
	if err == unix.EEXIST && isDevAt(dfd, name, fmt, rdev) {
		err = nil
	}
	return ss.applyOwner(dfd, name, op, err)
}

// mkdev makes name in dfd the device node a guest asked for: a real one
// with ServerOptions.AllowDevices, else its placeholder.
func (s *Server) mkdev(dfd int, name string, fmt, perm, rdev uint32) error {
	if s.opts.AllowDevices {
		return unix.Mknodat(dfd, name, fmt|perm, int(rdev))
	}
	return mkdevAt(dfd, name, fmt, perm, rdev)
}

// isDevAt reports whether name in dfd is device rdev of type fmt, or
// its placeholder.
func isDevAt(dfd int, name string, fmt, rdev uint32) bool {
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	if st.Mode&unix.S_IFMT == fmt {
		return uint64(st.Rdev) == uint64(rdev)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	f, r, ok := readDev(unix.Lgetxattr, hostfs.FDPath(dfd)+"/"+name)
	return ok && f == fmt && r == rdev
}

// applyMoveOver renames Path to Path2, removing first what stops the
// rename at Path2 (a non-empty directory, or a file of the other kind).
// A missing Path with Path2 present was moved before.
func (ss *session) applyMoveOver(w *dirWalker, dfd int, name string, op *WBOp) error {
	nfd, newName, err := w.parent(op.Path2)
	if err != nil {
		return err
	}
	ss.markPath(dfd, name, invalidation.MoveFrom)
	ss.markPath(nfd, newName, invalidation.MoveTo)
	err = unix.Renameat2(dfd, name, nfd, newName, 0)
	switch err {
	case unix.EEXIST, unix.ENOTEMPTY, unix.ENOTDIR, unix.EISDIR:
		w.stale = true
		if err = removeTree(nfd, newName); err == nil {
			err = unix.Renameat2(dfd, name, nfd, newName, 0)
		}
	case unix.ENOENT:
		if unix.Faccessat(nfd, newName, unix.F_OK, unix.AT_SYMLINK_NOFOLLOW) == nil {
			return nil
		}
	}
	if err == nil && op.Path != op.Path2 {
		err = dropSameFile(dfd, name, nfd, newName)
	}
	if err == nil {
		w.stale = true // a directory moved: the walker's paths under it changed
	}
	return err
}

// dropSameFile removes name in dfd if it is still there as the file
// newName in nfd is: rename(2) between two hard links of one file does
// nothing and succeeds, and a move must leave its source gone.
func dropSameFile(dfd int, name string, nfd int, newName string) error {
	var from, to unix.Stat_t
	if unix.Fstatat(dfd, name, &from, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		unix.Fstatat(nfd, newName, &to, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		from.Dev != to.Dev || from.Ino != to.Ino {
		return nil
	}
	if err := unix.Unlinkat(dfd, name, 0); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}

// applyXattrs makes name's extended attributes those in data, leaving
// alone the ones the guest may not reach (hiddenXattr).
func applyXattrs(dfd int, name string, data []byte) error {
	want, err := DecodeXattrs(data)
	if err != nil {
		return err
	}
	fd, st, err := openStat(dfd, name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		if len(want) > 0 {
			return unix.EPERM
		}
		return nil
	}
	return setXattrs(hostfs.FDPath(fd), want)
}

// openStat opens name in dfd as an O_PATH fd, not following a symlink,
// and stats it.
func openStat(dfd int, name string) (int, *unix.Stat_t, error) {
	fd, err := hostfs.OpenNode(dfd, name)
	if err != nil {
		return -1, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, &st, nil
}

// setXattrs removes the visible attributes of path not in want, and
// sets those in want.
func setXattrs(path string, want []Xattr) error {
	keep := map[string]bool{}
	for _, x := range want {
		if hiddenXattr(x.Name) {
			return unix.EPERM
		}
		keep[x.Name] = true
	}
	have, err := listXattrs(path)
	if err != nil {
		return err
	}
	for _, n := range have {
		if !keep[n] && !hiddenXattr(n) {
			if err := unix.Removexattr(path, n); err != nil && err != unix.ENODATA {
				return err
			}
		}
	}
	for _, x := range want {
		if err := unix.Setxattr(path, x.Name, x.Value, 0); err != nil {
			return err
		}
	}
	return nil
}

// listXattrs returns the names of path's extended attributes.
func listXattrs(path string) ([]string, error) {
	buf := make([]byte, 64<<10)
	n, err := unix.Listxattr(path, buf)
	if err == unix.ERANGE {
		buf = make([]byte, MaxIO)
		n, err = unix.Listxattr(path, buf)
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, b := range splitNul(buf[:n]) {
		names = append(names, string(b))
	}
	return names, nil
}

// splitNul splits a NUL-terminated list.
func splitNul(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		if i > 0 {
			out = append(out, b[:i])
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}

//go:build linux

package upstream

import (
	"bytes"
	"strings"

	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// Write-back from delegated subtrees. Ops name files by path relative to
// the export root, walked one component at a time beneath it (O_NOFOLLOW,
// no absolute path is ever built), and are applied in order within a
// request. Each is idempotent: re-applying a batch after a lost reply or
// a guest crash ends in the same host state.
//
// An op that fails for lack of space (ENOSPC, EDQUOT), descriptors or
// memory (WBStalls) ends the request:
// the guest keeps it and sends it again once there is space, so the ops
// after it are not applied before it (they get ECANCELED).

func (ss *session) apply(req *ApplyReq, resp *ApplyResp) error {
	if err := ss.writable(); err != nil {
		return err
	}
	resp.Errnos = make([]uint32, len(req.Ops))
	resp.Inos = make([]uint64, len(req.Ops))
	w := &dirWalker{ss: ss, fds: map[string]int{}}
	defer w.reset()
	for i := range req.Ops {
		op := &req.Ops[i]
		err := ss.applyOne(w, op)
		if op.Kind == WBRename || op.Kind == WBRmdir || w.stale {
			w.reset() // directories may have moved or gone
		}
		if err == nil {
			if op.Kind <= WBSymlink {
				resp.Inos[i] = w.inoAt(op.Path)
			}
			continue
		}
		resp.Errnos[i] = uint32(toErrno(err))
		if WBStalls(toErrno(err)) {
			for j := i + 1; j < len(req.Ops); j++ {
				resp.Errnos[j] = uint32(unix.ECANCELED)
			}
			break
		}
	}
	return nil
}

// inoAt returns the inode number at path, or 0.
func (w *dirWalker) inoAt(path string) uint64 {
	dfd, name, err := w.parent(path)
	if err != nil {
		return 0
	}
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return 0
	}
	return st.Ino
}

func toErrno(err error) unix.Errno {
	if e, ok := err.(unix.Errno); ok {
		return hostfs.ToLinux(e)
	}
	return unix.EIO
}

// dirWalker opens the directories of one apply request's paths beneath
// the export root, one component at a time (O_PATH, O_DIRECTORY,
// O_NOFOLLOW: no symlink is followed, no absolute path built), and keeps
// each open for the rest of the request: a batch's ops mostly share
// their directories. Renames and rmdirs empty it (apply), as they may
// move or remove a directory it holds; so does reaching maxWalkerFDs.
type dirWalker struct {
	ss    *session
	fds   map[string]int // directory path ("" is the root) -> O_PATH fd
	stale bool           // an op removed or moved a directory: reset after it
}

const maxWalkerFDs = 256

// parent returns the fd of the directory holding path's last component,
// and that name. The fd is the walker's: valid until its next reset.
func (w *dirWalker) parent(path string) (int, string, error) {
	dir, name := "", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir, name = path[:i], path[i+1:]
		if dir == "" {
			return -1, "", unix.EINVAL // an empty component: "/abs"
		}
	}
	if err := validName(name); err != nil {
		return -1, "", err
	}
	fd, err := w.dir(dir)
	return fd, name, err
}

// dir opens directory path (relative to the root; "" is the root).
func (w *dirWalker) dir(path string) (int, error) {
	if fd, ok := w.fds[path]; ok {
		return fd, nil
	}
	if len(w.fds) >= maxWalkerFDs {
		w.reset()
	}
	var fd int
	if path == "" {
		r, err := w.ss.nodeFD(w.ss.root)
		if err != nil {
			return -1, err
		}
		fd, err = unix.Dup(r.fd)
		r.release()
		if err != nil {
			return -1, err
		}
	} else {
		pfd, name, err := w.parent(path)
		if err != nil {
			return -1, err
		}
		if fd, err = unix.Openat(pfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
			return -1, err
		}
	}
	w.fds[path] = fd
	return fd, nil
}

// reset closes every directory the walker holds.
func (w *dirWalker) reset() {
	for p, fd := range w.fds {
		unix.Close(fd)
		delete(w.fds, p)
	}
	w.stale = false
}

// markPath suppresses the host events of a write-back op.
func (ss *session) markPath(dfd int, name string, ops ...invalidation.Op) {
	var st unix.Stat_t
	if unix.Fstat(dfd, &st) == nil {
		ss.mark(ss.nodes.find(st.Dev, st.Ino), name, ops...)
	}
}

func (ss *session) applyOne(w *dirWalker, op *WBOp) error {
	if op.Path == "" && op.Kind == WBSetattr { // the export root itself: its mode, owner, times
		dfd, err := w.dir("")
		if err != nil {
			return err
		}
		ss.markPath(dfd, "", invalidation.Attrib, invalidation.Modify)
		return ss.applyWBSetattr(dfd, ".", op)
	}
	dfd, name, err := w.parent(op.Path)
	if err != nil {
		return err
	}
	if op.Flags&WBReplace != 0 && op.Kind != WBRename {
		if err := ss.clearFor(w, dfd, name, op); err != nil {
			return err
		}
	}
	switch op.Kind {
	case WBMknod, WBRemoveTree, WBMoveOver, WBXattrs:
		return ss.applyTree(w, dfd, name, op)
	case WBMkdir:
		ss.markPath(dfd, name, invalidation.Create, invalidation.Attrib)
		err = unix.Mkdirat(dfd, name, op.Mode&07777)
		if err == unix.EEXIST {
			err = isType(dfd, name, unix.S_IFDIR)
		}
		return ss.applyOwner(dfd, name, op, err)
	case WBCreate:
		ss.markPath(dfd, name, invalidation.Create, invalidation.Attrib)
		host, kept := ss.srv.splitMode(unix.S_IFREG, op.Mode&07777)
		err = unix.Mknodat(dfd, name, unix.S_IFREG|host, 0)
		if err == nil {
			err = ss.srv.keepSetidAt(dfd, name, kept)
		} else if err == unix.EEXIST {
			err = isType(dfd, name, unix.S_IFREG)
		}
		if err := ss.applyOwner(dfd, name, op, err); err != nil {
			return err
		}
		return applyTimes(dfd, name, op)
	case WBSymlink:
		ss.markPath(dfd, name, invalidation.Create, invalidation.Attrib)
		err = unix.Symlinkat(op.Target, dfd, name)
		if err == unix.EEXIST {
			buf := make([]byte, unix.PathMax)
			if n, rerr := unix.Readlinkat(dfd, name, buf); rerr == nil && string(buf[:n]) == op.Target {
				err = nil
			}
		}
		if err := ss.applyOwner(dfd, name, op, err); err != nil {
			return err
		}
		return applyTimes(dfd, name, op)
	case WBWrite:
		ss.markPath(dfd, name, invalidation.Modify, invalidation.Attrib)
		return applyWrite(dfd, name, op)
	case WBUnlink, WBRmdir:
		ss.markPath(dfd, name, invalidation.Delete)
		flags := 0
		if op.Kind == WBRmdir {
			flags = unix.AT_REMOVEDIR
		}
		if err := unix.Unlinkat(dfd, name, flags); err != nil && err != unix.ENOENT {
			return err
		}
		return nil
	case WBRename:
		return ss.applyRename(w, dfd, name, op)
	case WBSetattr:
		ss.markPath(dfd, name, invalidation.Attrib, invalidation.Modify)
		return ss.applyWBSetattr(dfd, name, op)
	case WBLink:
		return ss.applyLink(w, dfd, name, op)
	}
	return unix.EINVAL
}

// applyOwner gives a created name its owner, unless creating it failed.
func (ss *session) applyOwner(dfd int, name string, op *WBOp, err error) error {
	if err != nil {
		return err
	}
	return ss.chownNew(dfd, name, Caller{Uid: op.Uid, Gid: op.Gid})
}

func applyWrite(dfd int, name string, op *WBOp) error {
	fd, err := openExisting(dfd, name, unix.O_WRONLY|unix.O_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if op.First {
		if err := emptyTo(fd, int64(op.Size)); err != nil {
			return err
		}
	}
	if err := writeSparse(fd, op.Data, op.Offset); err != nil {
		return err
	}
	return applyTimes(dfd, name, op)
}

// A write-back's WBWrite ops carry a file whole, zeros included, and
// the first of them leaves the file reading as zeros of its size
// (emptyTo), so that the pieces of zeros need not be written: a sparse
// file keeps its holes on the host (it took 1.8 GB on the host for 415
// MB in the guest).

// sparseBlock is the piece of zeros writeSparse leaves out.
const sparseBlock = 4096

var zeroBlock [sparseBlock]byte

// emptyTo makes fd a file of size bytes that reads as zeros: its old
// contents are punched out (not truncated to zero, which on ext4 makes
// the next close write the file out at once) or, where holes cannot be
// punched, truncated away.
func emptyTo(fd int, size int64) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if n := min(st.Size, size); n > 0 {
		if unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, n) != nil {
			if err := unix.Ftruncate(fd, 0); err != nil {
				return err
			}
		}
	}
	return unix.Ftruncate(fd, size)
}

// writeSparse writes b at off but its sparseBlock-aligned pieces of
// zeros, which the file reads as already; the file ends no earlier than
// b, as after a write (zeros left out at the end do not extend it).
func writeSparse(fd int, b []byte, off int64) error {
	end := off + int64(len(b))
	for len(b) > 0 {
		n := 0 // a run of pieces with data
		for n < len(b) {
			k := min(len(b)-n, sparseBlock-int((off+int64(n))%sparseBlock))
			if bytes.Equal(b[n:n+k], zeroBlock[:k]) {
				break
			}
			n += k
		}
		if err := pwriteAll(fd, b[:n], off); err != nil {
			return err
		}
		off, b = off+int64(n), b[n:]
		for len(b) > 0 { // a run of zeros
			k := min(len(b), sparseBlock-int(off%sparseBlock))
			if !bytes.Equal(b[:k], zeroBlock[:k]) {
				break
			}
			off, b = off+int64(k), b[k:]
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Size < end {
		return unix.Ftruncate(fd, end)
	}
	return nil
}

func pwriteAll(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		if err != nil {
			return err
		}
		off, b = off+int64(n), b[n:]
	}
	return nil
}

// applyTimes sets the times op carries (Valid), if any, on name itself,
// never a symlink's target: the guest's, not the write-back's.
func applyTimes(dfd int, name string, op *WBOp) error {
	if op.Valid&(SetAtime|SetMtime) == 0 {
		return nil
	}
	ts := []unix.Timespec{timeArg(op.Valid, SetAtime, 0, op.Atime), timeArg(op.Valid, SetMtime, 0, op.Mtime)}
	return unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func (ss *session) applyWBSetattr(dfd int, name string, op *WBOp) error {
	if op.Valid&SetSize != 0 {
		fd, err := openExisting(dfd, name, unix.O_WRONLY|unix.O_CLOEXEC)
		if err != nil {
			return err
		}
		err = unix.Ftruncate(fd, int64(op.Size))
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	if op.Valid&SetMode != 0 {
		if err := ss.chmodNoFollow(dfd, name, func(_, _ uint32) uint32 { return op.Mode & 07777 }); err != nil {
			return err
		}
	}
	if op.Valid&(SetUid|SetGid) != 0 {
		uid, gid := -1, -1
		if op.Valid&SetUid != 0 {
			uid = int(op.Uid)
		}
		if op.Valid&SetGid != 0 {
			gid = int(op.Gid)
		}
		if err := unix.Fchownat(dfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		// The set-id bits the chown drops: none if the mode just set has
		// none (the write-back's usual setattr, sent with its owner).
		if op.Valid&SetMode == 0 || op.Mode&setidBits != 0 {
			if err := ss.chmodNoFollow(dfd, name, ss.srv.chownedMode); err != nil {
				return err
			}
		}
	}
	if op.Valid&(SetAtime|SetMtime) != 0 {
		ts := []unix.Timespec{timeArg(op.Valid, SetAtime, 0, op.Atime), timeArg(op.Valid, SetMtime, 0, op.Mtime)}
		return unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil
}

// chmodNoFollow changes name's mode to what f makes of its type and the
// mode the guest sees (07777 bits), if that differs; a symlink is left
// alone, never followed to its target, which may lie outside the export.
func (ss *session) chmodNoFollow(dfd int, name string, f func(fmt, mode uint32) uint32) error {
	fd, err := hostfs.OpenNode(dfd, name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	fmt := st.Mode & unix.S_IFMT
	if fmt == unix.S_IFLNK {
		return nil
	}
	cur, absent := ss.srv.keptMode(fd, &st)
	if mode := f(fmt, cur&07777); mode != cur&07777 {
		return ss.srv.chmod(fd, fmt, mode, absent)
	}
	return nil
}

func (ss *session) applyRename(w *dirWalker, dfd int, name string, op *WBOp) error {
	flags, err := renameFlags(op.Flags)
	if err != nil {
		return err
	}
	nfd, newName, err := w.parent(op.Path2)
	if err != nil {
		return err
	}
	ss.markPath(dfd, name, invalidation.MoveFrom)
	ss.markPath(nfd, newName, invalidation.MoveTo)
	err = unix.Renameat2(dfd, name, nfd, newName, flags)
	if err == unix.ENOENT && unix.Faccessat(nfd, newName, unix.F_OK, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return nil // done before: the source is gone and the target there
	}
	return err
}

func (ss *session) applyLink(w *dirWalker, dfd int, name string, op *WBOp) error {
	nfd, newName, err := w.parent(op.Path2)
	if err != nil {
		return err
	}
	ss.markPath(nfd, newName, invalidation.Create)
	err = unix.Linkat(dfd, name, nfd, newName, 0)
	if err == unix.EEXIST {
		var a, b unix.Stat_t
		if unix.Fstatat(dfd, name, &a, unix.AT_SYMLINK_NOFOLLOW) == nil &&
			unix.Fstatat(nfd, newName, &b, unix.AT_SYMLINK_NOFOLLOW) == nil && a.Ino == b.Ino {
			return nil
		}
	}
	return err
}

// isType checks that name in dfd is of type fmt (an S_IF constant).
func isType(dfd int, name string, fmt uint32) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != fmt {
		if fmt == unix.S_IFDIR {
			return unix.ENOTDIR
		}
		return unix.EEXIST
	}
	return nil
}

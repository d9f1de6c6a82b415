//go:build linux

package upstream

import (
	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

func (ss *session) setattr(req *SetattrReq, resp *AttrResp) error {
	if err := ss.writable(); err != nil {
		return err
	}
	return ss.withNode(req.Node, func(n *node, fd int) error {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		ss.markNode(n, invalidation.Attrib, invalidation.Modify)
		if err := ss.applySetattr(req, n, fd, &st); err != nil {
			return err
		}
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		resp.Attr = ss.attrOf(fd, &st)
		return nil
	})
}

func (ss *session) applySetattr(req *SetattrReq, n *node, fd int, st *unix.Stat_t) error {
	if req.Valid&SetSize != 0 {
		if err := ss.truncate(req, fd); err != nil {
			return err
		}
	}
	if req.Valid&(SetUid|SetGid) != 0 {
		uid, gid := ^uint32(0), ^uint32(0)
		if req.Valid&SetUid != 0 {
			uid = req.Uid
		}
		if req.Valid&SetGid != 0 {
			gid = req.Gid
		}
		if err := ss.setOwner(fd, st, uid, gid); err != nil {
			return err
		}
	}
	if mode, ok, absent := ss.newMode(req, n.fmt, fd, st); ok && n.fmt != unix.S_IFLNK {
		if err := ss.srv.chmod(fd, n.fmt, mode, absent); err != nil {
			return err
		}
	}
	return ss.setTimes(req, n, fd)
}

// newMode returns the mode a setattr leaves a file with, st being its
// stat from before, and whether it must be set: the mode asked for, less
// the set-id bits that SetKillSuidgid drops and, where the server keeps
// them (server_setid.go), those a change of owner drops. absent reports
// that it found no setidXattr (for chmod).
func (ss *session) newMode(req *SetattrReq, fmt uint32, fd int, st *unix.Stat_t) (mode uint32, ok, absent bool) {
	set, kill := req.Valid&SetMode != 0, req.Valid&SetKillSuidgid != 0
	chown := ss.srv.keepsSetid(fmt) && req.Valid&(SetUid|SetGid) != 0
	if !kill && (set || !chown) {
		return req.Mode & 07777, set, false
	}
	cur, absent := ss.srv.keptMode(fd, st)
	cur &= 07777
	mode = req.Mode & 07777
	if !set {
		mode = cur
		if chown {
			mode = killOnChown(mode)
		}
	}
	switch {
	case kill && req.Valid&(SetUid|SetGid) != 0:
		mode = killOnChown(mode) // as the host's chown by root does
	case kill:
		mode &^= setidBits
	}
	return mode, set || mode != cur, absent
}

func (ss *session) truncate(req *SetattrReq, fd int) error {
	if req.Handle != 0 {
		return ss.withFile(req.Handle, func(_ *openFile, hfd int) error {
			return unix.Ftruncate(hfd, int64(req.Size))
		})
	}
	return unix.Truncate(hostfs.FDPath(fd), int64(req.Size))
}

func (ss *session) setTimes(req *SetattrReq, n *node, fd int) error {
	if req.Valid&(SetAtime|SetMtime|SetAtimeNow|SetMtimeNow) == 0 {
		return nil
	}
	ts := []unix.Timespec{timeArg(req.Valid, SetAtime, SetAtimeNow, req.Atime),
		timeArg(req.Valid, SetMtime, SetMtimeNow, req.Mtime)}
	if n.fmt == unix.S_IFLNK {
		return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, hostfs.FDPath(fd), ts, 0)
}

func timeArg(valid, set, now uint32, ns int64) unix.Timespec {
	switch {
	case valid&now != 0:
		return unix.Timespec{Nsec: unix.UTIME_NOW}
	case valid&set != 0:
		return unix.NsecToTimespec(ns)
	}
	return unix.Timespec{Nsec: unix.UTIME_OMIT}
}

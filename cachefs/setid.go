package cachefs

import (
	"syscall"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Set-id bits of delegated files, which the guest keeps (local.attr):
// the host's rules for dropping them are applied here.

// killOnWrite drops from a delegated regular file's attributes a the
// set-id bits that a write by a caller without CAP_FSETID drops, as
// Linux does: set-user-ID, and set-group-ID where group execution is
// set or the caller (uid, gid) is neither root nor of the file's group
// (its supplementary groups are not known: those lose the bit too).
// It reports whether the mode changed.
func killOnWrite(a *upstream.Attr, uid, gid uint32) bool {
	if a.Mode&sIFMT != sIFREG {
		return false
	}
	old := a.Mode
	a.Mode &^= syscall.S_ISUID
	if a.Mode&syscall.S_IXGRP != 0 || (uid != 0 && gid != a.Gid) {
		a.Mode &^= syscall.S_ISGID
	}
	return a.Mode != old
}

// setattrBits are the SETATTR valid bits that change an attribute. A
// SETATTR with none of them is how the kernel asks, with
// CAP_HANDLE_KILLPRIV_V2, that a file lose its set-id bits before a
// write it makes itself (passthrough) or a chown(-1, -1) (its
// file_remove_privs).
const setattrBits = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_SIZE | fuse.FATTR_ATIME |
	fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW | fuse.FATTR_CTIME | fuse.FATTR_KILL_SUIDGID

// queueModeLocked queues a delegated node's mode for write-back. Needs
// w.mu.
func (fs *FS) queueModeLocked(n *node) {
	if p, ok := fs.nodes.path(n); ok {
		l := &n.local.attr
		fs.wb.addLocked(upstream.WBOp{Kind: upstream.WBSetattr, Path: p, Mode: l.Mode, Uid: l.Uid, Gid: l.Gid,
			Valid: upstream.SetMode}, "", n)
	}
}

// dKillPrivsLocked answers the kernel's SETATTR without changes (setattrBits)
// of a delegated node: its set-id bits go as a write by the caller would
// drop them. Needs w.mu.
func (fs *FS) dKillPrivsLocked(n *node, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if l := &n.local.attr; killOnWrite(l, in.Caller.Uid, in.Caller.Gid) {
		l.Ctime = nowNs()
		fs.queueModeLocked(n)
	}
	fs.fillAttr(out, n, &n.local.attr)
	return fuse.OK
}

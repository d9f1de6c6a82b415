package cachefs

import (
	"syscall"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

type fuseStatus = fuse.Status

const fuseBadf = fuse.EBADF

const (
	sIFMT  = syscall.S_IFMT
	sIFDIR = syscall.S_IFDIR
	sIFREG = syscall.S_IFREG
	sIFLNK = syscall.S_IFLNK
)

// setAttr converts host attributes for the kernel.
func setAttr(out *fuse.Attr, a *upstream.Attr) {
	*out = fuse.Attr{Ino: a.Ino, Size: a.Size, Blocks: a.Blocks, Mode: a.Mode, Nlink: a.Nlink,
		Rdev: a.Rdev, Blksize: a.Blksize}
	out.Uid, out.Gid = a.Uid, a.Gid
	out.Atime, out.Atimensec = splitNs(a.Atime)
	out.Mtime, out.Mtimensec = splitNs(a.Mtime)
	out.Ctime, out.Ctimensec = splitNs(a.Ctime)
}

// splitNs splits nanoseconds since the epoch into seconds and a
// nanosecond part in [0, 1e9), as the kernel wants them (also before
// 1970).
func splitNs(ns int64) (uint64, uint32) {
	sec, nsec := ns/1e9, ns%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return uint64(sec), uint32(nsec)
}

func setTimeout(d time.Duration) (uint64, uint32) {
	return uint64(d / time.Second), uint32(d % time.Second)
}

// fillEntry fills a kernel entry reply for node n.
func (fs *FS) fillEntry(out *fuse.EntryOut, n *node, a *upstream.Attr) {
	out.NodeId = n.id
	out.Generation = 0
	setAttr(&out.Attr, a)
	out.Attr.Ino = fs.nodes.shownIno(n, a)
	entry, attr := fs.timeouts(n, a.Mode)
	out.EntryValid, out.EntryValidNsec = setTimeout(entry)
	out.AttrValid, out.AttrValidNsec = setTimeout(attr)
}

// fillAttr fills a kernel attribute reply for node n.
func (fs *FS) fillAttr(out *fuse.AttrOut, n *node, a *upstream.Attr) {
	setAttr(&out.Attr, a)
	out.Attr.Ino = fs.nodes.shownIno(n, a)
	_, attr := fs.timeouts(n, a.Mode)
	out.AttrValid, out.AttrValidNsec = setTimeout(attr)
}

func caller(h *fuse.InHeader) upstream.Caller {
	return upstream.Caller{Uid: h.Uid, Gid: h.Gid, Pid: h.Pid}
}

// status2err turns a FUSE status back into an error (nil for OK).
func (fs *FS) status2err(st fuse.Status) error {
	if st.Ok() {
		return nil
	}
	return syscall.Errno(st)
}

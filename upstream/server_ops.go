//go:build linux

package upstream

import (
	"fmt"
	"reflect"

	"golang.org/x/sys/unix"
)

// handler decodes a request payload, performs it and returns the reply
// message. cancel is closed when the guest gives the request up
// (OpCancel); it is nil for ops that cannot block (see cancellable).
type handler func(ss *session, cancel <-chan struct{}, payload []byte) (any, error)

// handlers is the dispatch table, indexed by op: one handler for each op
// of the ops table but the handshake's (TestOpsHandlers). Ops without an
// entry are unknown: a protocol error.
var handlers [opCount]handler

func handlerFor(op Op) handler {
	if op >= opCount {
		return nil
	}
	return handlers[op]
}

// on registers a typed handler for op; its row in the ops table
// (ops_table.go) must name Req and Resp and not be cancellable.
func on[Req, Resp any](op Op, f func(ss *session, req *Req, resp *Resp) error) {
	register(op, false, func(ss *session, _ <-chan struct{}, req *Req, resp *Resp) error {
		return f(ss, req, resp)
	})
}

// onCancellable registers a typed handler for op that may block until
// cancel is closed; op's row must be cancellable.
func onCancellable[Req, Resp any](op Op, f func(ss *session, cancel <-chan struct{}, req *Req, resp *Resp) error) {
	register(op, true, f)
}

// register installs op's handler after checking it against op's row: a
// handler that disagrees with the table is a bug found at start.
func register[Req, Resp any](op Op, cancellable bool, f func(ss *session, cancel <-chan struct{}, req *Req, resp *Resp) error) {
	i := op.info()
	if i.name == "" || i.handshake || i.cancellable != cancellable ||
		reflect.TypeOf(i.req) != reflect.TypeFor[*Req]() || reflect.TypeOf(i.resp) != reflect.TypeFor[*Resp]() {
		panic(fmt.Sprintf("upstream: the handler of op %d (%T, %T, cancellable %v) disagrees with its row in the ops table",
			op, (*Req)(nil), (*Resp)(nil), cancellable))
	}
	handlers[op] = func(ss *session, cancel <-chan struct{}, payload []byte) (any, error) {
		var req Req
		if err := Unmarshal(payload, &req); err != nil {
			return nil, protoErrorf("op %d: %v", op, err)
		}
		var resp Resp
		if err := f(ss, cancel, &req, &resp); err != nil {
			return nil, err
		}
		return &resp, nil
	}
}

func init() {
	on(OpPing, func(ss *session, _ *Empty, _ *Empty) error { return nil })
	on(OpLookup, (*session).lookup)
	on(OpForget, (*session).forget)
	on(OpGetattr, (*session).getattr)
	on(OpSetattr, (*session).setattr)
	on(OpReadlink, (*session).readlink)
	on(OpMknod, (*session).mknod)
	on(OpMkdir, (*session).mkdir)
	on(OpSymlink, (*session).symlink)
	on(OpLink, (*session).link)
	on(OpUnlink, (*session).unlink)
	on(OpRmdir, (*session).rmdir)
	on(OpRename, (*session).rename)
	on(OpOpen, (*session).open)
	on(OpCreate, (*session).create)
	on(OpRead, (*session).read)
	on(OpReadNode, (*session).readNode)
	on(OpReadNodes, (*session).readNodes)
	on(OpWrite, (*session).write)
	on(OpFlush, func(ss *session, _ *HandleReq, _ *Empty) error { return nil })
	on(OpFsync, (*session).fsync)
	on(OpRelease, (*session).releaseOp)
	on(OpOpendir, (*session).opendir)
	on(OpReaddir, (*session).readdir)
	on(OpReleasedir, (*session).releaseOp)
	on(OpStatfs, (*session).statfs)
	on(OpGetxattr, (*session).getxattr)
	on(OpListxattr, (*session).listxattr)
	on(OpSetxattr, (*session).setxattr)
	on(OpRemovexattr, (*session).removexattr)
	on(OpFallocate, (*session).fallocate)
	on(OpLseek, (*session).lseek)
	on(OpGetlk, (*session).getlk)
	onCancellable(OpSetlk, (*session).setlk)
	on(OpCancel, (*session).cancel)
	on(OpReadTree, (*session).readTree)
	on(OpWatch, (*session).watch)
	on(OpUnwatch, (*session).unwatch)
	on(OpAck, (*session).ack)
	on(OpApply, (*session).apply)
	on(OpAccess, func(ss *session, _ *AccessReq, _ *Empty) error {
		return unix.ENOSYS // the guest mounts with default_permissions
	})
}

// withNode resolves a node id and an O_PATH fd for it, and runs f.
func (ss *session) withNode(id uint64, f func(n *node, fd int) error) error {
	n, err := ss.nodes.get(id)
	if err != nil {
		return err
	}
	r, err := ss.nodeFD(n)
	if err != nil {
		return err
	}
	defer r.release()
	return f(n, r.fd)
}

// withDirName is withNode for a directory and a name in it.
func (ss *session) withDirName(id uint64, name string, f func(dir *node, fd int) error) error {
	if err := validName(name); err != nil {
		return err
	}
	if Parked(name) {
		return unix.EPERM // the write-back's own (lookup answers ENOENT)
	}
	return ss.withNode(id, func(n *node, fd int) error {
		if n.fmt != unix.S_IFDIR {
			return unix.ENOTDIR
		}
		return f(n, fd)
	})
}

// withFile resolves an open file handle and its fd, and runs f.
func (ss *session) withFile(h uint64, f func(of *openFile, fd int) error) error {
	of, err := ss.handle(h)
	if err != nil {
		return err
	}
	r, err := ss.fileFD(of)
	if err != nil {
		return err
	}
	defer r.release()
	return f(of, r.fd)
}

func (ss *session) writable() error {
	if ss.srv.opts.ReadOnly {
		return unix.EROFS
	}
	return nil
}

func (ss *session) lookup(req *LookupReq, resp *EntryResp) error {
	if Parked(req.Name) {
		return unix.ENOENT
	}
	return ss.withDirName(req.Parent, req.Name, func(dir *node, fd int) (err error) {
		resp.Entry, err = ss.lookupIn(dir, fd, req.Name)
		return err
	})
}

func (ss *session) forget(req *ForgetReq, _ *Empty) error {
	for _, it := range req.Items {
		if n := ss.nodes.forget(it.Node, it.Count); n != nil {
			ss.srv.fds.remove(n)
		}
	}
	return nil
}

func (ss *session) getattr(req *NodeReq, resp *AttrResp) (err error) {
	n, err := ss.nodes.get(req.Node)
	if err != nil {
		return err
	}
	resp.Attr, err = ss.statNode(n)
	return err
}

func (ss *session) readlink(req *NodeReq, resp *ReadlinkResp) error {
	return ss.withNode(req.Node, func(n *node, fd int) error {
		buf := make([]byte, unix.PathMax)
		k, err := unix.Readlinkat(fd, "", buf)
		resp.Target = string(buf[:max(k, 0)])
		return err
	})
}

func (ss *session) statfs(_ *Empty, resp *StatfsResp) error {
	var st unix.Statfs_t
	err := ss.withNode(RootID, func(_ *node, fd int) error { return unix.Fstatfs(fd, &st) })
	if err != nil {
		return err
	}
	*resp = StatfsResp{Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail, Files: st.Files,
		Ffree: st.Ffree, Bsize: uint32(st.Bsize), NameLen: uint32(st.Namelen), Frsize: uint32(st.Frsize)}
	return nil
}

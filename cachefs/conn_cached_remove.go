package cachefs

import (
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The kernel of the cached connection opens files without telling the
// daemon, so when a name goes the daemon cannot tell whether someone
// still has the file open. It assumes so for every node the kernel
// knows: a file losing a name keeps a handle open on the host (and its
// data readable) until the kernel forgets the node; a directory removed
// keeps its last attributes, with no links, for fstat of an open one.

// removals holds what removed names leave behind, by kernel nodeid.
type removals struct {
	mu   sync.Mutex // protects the following
	kept map[uint64]*heldHandle
	dirs map[uint64]fuse.Attr
}

func (c *cachedConn) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	c.keepChild(h.NodeId, name)
	return c.FS.Unlink(cancel, h, name)
}

func (c *cachedConn) Rename(cancel <-chan struct{}, in *fuse.RenameIn, name, newName string) fuse.Status {
	c.keepChild(in.Newdir, newName) // replaced, or exchanged: kept either way
	return c.FS.Rename(cancel, in, name, newName)
}

func (c *cachedConn) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	n := c.kernelChild(h.NodeId, name)
	var out fuse.AttrOut
	if n == nil || !c.FS.GetAttr(cancel, &fuse.GetAttrIn{InHeader: fuse.InHeader{NodeId: n.id}}, &out).Ok() {
		return c.FS.Rmdir(cancel, h, name)
	}
	st := c.FS.Rmdir(cancel, h, name)
	if st.Ok() {
		out.Attr.Nlink = 0
		c.gone.mu.Lock()
		c.gone.dirs[n.id] = out.Attr
		c.gone.mu.Unlock()
	}
	return st
}

func (c *cachedConn) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	st := c.FS.GetAttr(cancel, in, out)
	if st != fuse.Status(syscall.ESTALE) && st != fuse.ENOENT {
		return st
	}
	c.gone.mu.Lock()
	a, ok := c.gone.dirs[in.NodeId]
	c.gone.mu.Unlock()
	if !ok {
		return st
	}
	out.Attr = a
	return fuse.OK
}

// kernelChild returns the node the kernel knows as name in parent.
func (c *cachedConn) kernelChild(parent uint64, name string) *node {
	p := c.nodes.get(parent)
	if p == nil {
		return nil
	}
	return c.nodes.child(p, name)
}

// keepChild keeps a read handle of the regular file name in parent
// until the kernel forgets it; the removal then opens it on the host.
func (c *cachedConn) keepChild(parent uint64, name string) {
	n := c.kernelChild(parent, name)
	if n == nil || n.mode&sIFMT != sIFREG {
		return
	}
	k := handleKey{n.id, readHandle}
	h, st := c.held.get(k)
	if !st.Ok() {
		return
	}
	c.gone.mu.Lock()
	defer c.gone.mu.Unlock()
	if c.gone.kept[n.id] != nil {
		c.held.put(k, h)
		return
	}
	c.gone.kept[n.id] = h
}

// keptHandle returns node's kept read handle, with a reference.
func (c *cachedConn) keptHandle(node uint64) (*heldHandle, bool) {
	c.gone.mu.Lock()
	defer c.gone.mu.Unlock()
	h := c.gone.kept[node]
	if h == nil {
		return nil, false
	}
	c.held.mu.Lock()
	h.refs++
	c.held.mu.Unlock()
	return h, true
}

// forgotten lets go of what a removed name left of node.
func (c *cachedConn) forgotten(node uint64) {
	c.gone.mu.Lock()
	h := c.gone.kept[node]
	delete(c.gone.kept, node)
	delete(c.gone.dirs, node)
	c.gone.mu.Unlock()
	if h != nil {
		c.held.put(handleKey{node, readHandle}, h)
	}
}

package cachefs

import (
	"strings"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The lower view of an overlay is this mount's cached view of the
// subtree. Overlayfs holds the lower dentries it looked up and
// revalidates them: FUSE dentries have d_revalidate, which sends LOOKUP
// once an entry times out or is invalidated, and a LOOKUP that fails or
// names another node makes overlayfs answer ESTALE for every path
// through the dentry (it does not look the name up again). Writing back
// a rename or a removal makes exactly that happen: the host loses the
// old name, which an overlay's renamed directory or metacopy file still
// reaches its lower through.
//
// So the names the overlays' write-back moves or removes on the host,
// where the kernel knows them, are kept: before the ops are sent, each
// such name is noted with its node and attributes, and LOOKUP answers
// it with that node until the overlay is unregistered. The node stays
// valid on the host after a move (the host finds it by handle); after a
// removal, its last attributes are given.

// keptNames are the kept names; overlays.mu protects them. Lock order:
// overlays.mu before nodeTable.mu.
type keptNames struct {
	m map[kernelName]*keptName
}

type keptName struct {
	node *node
	attr upstream.Attr
	path string // the export path the name had
}

func (k *keptNames) init() { k.m = map[kernelName]*keptName{} }

// keepLowerNames keeps the names that ops move or remove.
func (fs *FS) keepLowerNames(ops []upstream.WBOp) {
	for i := range ops {
		switch ops[i].Kind {
		case upstream.WBMoveOver, upstream.WBRename, upstream.WBUnlink, upstream.WBRmdir:
			fs.keepLowerName(ops[i].Path, false)
		case upstream.WBRemoveTree:
			fs.keepLowerName(ops[i].Path, true)
		}
	}
}

// keepLowerName keeps the name path, if the kernel may hold it, and
// with tree the known names under it.
func (fs *FS) keepLowerName(path string, tree bool) {
	parent, n := fs.nodeAt(path)
	if n == nil {
		return
	}
	fs.keep(parent, n, path)
	if !tree || n.mode&sIFMT != sIFDIR {
		return
	}
	for _, m := range fs.nodesUnder(n) {
		if p, _ := fs.nodes.where(m); p != nil {
			fs.keep(p, m, path)
		}
	}
}

// nodeAt returns the node known at an export path, and its parent.
func (fs *FS) nodeAt(path string) (*node, *node) {
	n := fs.nodes.get(rootID)
	var parent *node
	for _, name := range strings.Split(path, "/") {
		if n == nil {
			return nil, nil
		}
		parent, n = n, fs.nodes.child(n, name)
	}
	return parent, n
}

// nodesUnder returns the known nodes below directory d.
func (fs *FS) nodesUnder(d *node) []*node {
	fs.nodes.mu.Lock()
	defer fs.nodes.mu.Unlock()
	var out []*node
	for _, n := range fs.nodes.byName {
		for p := n.parent; p != nil; p = p.parent {
			if p == d {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// keep notes n as the name it has in parent, with its attributes now.
func (fs *FS) keep(parent, n *node, path string) {
	_, name := fs.nodes.where(n)
	k := kernelName{parent.id, name}
	a, ok := fs.nodeAttr(n)
	if !ok {
		return
	}
	fs.ovl.mu.Lock()
	defer fs.ovl.mu.Unlock()
	if old := fs.ovl.kept.m[k]; old != nil {
		old.attr = a
		return
	}
	fs.nodes.pin(n)
	fs.ovl.kept.m[k] = &keptName{node: n, attr: a, path: path}
}

// nodeAttr returns n's attributes: cached, or from the host.
func (fs *FS) nodeAttr(n *node) (upstream.Attr, bool) {
	epoch := fs.up.Epoch()
	up, ok := fs.nodes.upOf(n, epoch)
	if !ok {
		return upstream.Attr{}, false
	}
	if a, ok := fs.cache.attr(epoch, up); ok {
		return a, true
	}
	var resp upstream.AttrResp
	if err := fs.rpc(upstream.OpGetattr, &upstream.NodeReq{Node: up}, &resp); err != nil {
		return upstream.Attr{}, false
	}
	return resp.Attr, true
}

// keptLookup answers a LOOKUP of a kept name.
func (fs *FS) keptLookup(h *fuse.InHeader, name string, out *fuse.EntryOut) (fuse.Status, bool) {
	if fs.ovl == nil {
		return fuse.OK, false
	}
	fs.ovl.mu.Lock()
	k := fs.ovl.kept.m[kernelName{h.NodeId, name}]
	fs.ovl.mu.Unlock()
	if k == nil {
		return fuse.OK, false
	}
	a, ok := fs.nodeAttr(k.node)
	if !ok {
		a = k.attr // removed on the host: as it was last
	}
	fs.nodes.mu.Lock()
	k.node.lookups++
	fs.nodes.byID[k.node.id] = k.node
	fs.nodes.mu.Unlock()
	fs.fillEntry(out, k.node, &a)
	return fuse.OK, true
}

// releaseKept forgets the names kept for the overlay of path.
func (fs *FS) releaseKept(path string) {
	fs.ovl.mu.Lock()
	var drop []*node
	for k, kn := range fs.ovl.kept.m {
		if path == "" || kn.path == path || strings.HasPrefix(kn.path, path+"/") {
			drop = append(drop, kn.node)
			delete(fs.ovl.kept.m, k)
		}
	}
	fs.ovl.mu.Unlock()
	for _, n := range drop {
		fs.unpin(n)
	}
}

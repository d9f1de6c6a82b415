package cachefs

import (
	"context"
	"sync/atomic"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// In modes that cache names, a directory read whole from offset 0
// leaves its listing in the metadata cache (dirFill), and later opens
// are served from that listing without the host (dirSnap).

// maxCachedListing bounds the directories whose listing is cached.
const maxCachedListing = 250000

// dirSnap is a listing that directory handles are served from; it is
// never changed once made. Each node in it is pinned until the last of
// its holders (handles and, for a cached listing still current, the
// cache) lets go: opening a cached directory costs no work per entry.
type dirSnap struct {
	names []string
	ents  []dentry     // ents[i] is names[i]
	refs  atomic.Int32 // holders; a holder may add one, the last releases
}

// newDirSnap makes a listing of names and their entries (ents[i] is
// names[i]), pins its nodes and returns it held once.
func newDirSnap(names []string, ents []dentry, pin func(*node)) *dirSnap {
	s := &dirSnap{names: names, ents: ents}
	for _, de := range ents {
		if de.node != nil {
			pin(de.node)
		}
	}
	s.refs.Store(1)
	return s
}

// release drops one hold; the last one unpins the nodes.
func (s *dirSnap) release(unpin func(*node)) {
	if s.refs.Add(-1) != 0 {
		return
	}
	for _, de := range s.ents {
		if de.node != nil {
			unpin(de.node)
		}
	}
}

// dirFill gathers a listing while a directory is read through the host.
// Each node in it is pinned until the listing is cached or abandoned.
type dirFill struct {
	epoch, dir, gen uint64
	next            uint64 // offset the next read must start at
	names           []string
	nodes           []*node
	attrs           []upstream.Attr
}

// openSnap returns a handle on dir's cached listing, if there is one.
func (fs *FS) openSnap(n *node, up, epoch uint64) *handle {
	snap, ok := fs.cache.listing(epoch, up)
	if !ok {
		return nil
	}
	h := &handle{node: n, dir: true, epoch: epoch, snap: snap}
	fs.handles.add(h)
	return h
}

// readSnap serves a read of a cached listing; entry i has offset i+1.
func (fs *FS) readSnap(h *handle, s *dirSnap, off uint64, out *fuse.DirEntryList, plus bool) {
	for i := off; i < uint64(len(s.names)); i++ {
		name := s.names[i]
		de := s.ents[i]
		e := fuse.DirEntry{Name: name, Off: i + 1, Mode: de.attr.Mode, Ino: fs.nodes.shownIno(de.node, &de.attr)}
		if !plus {
			if !out.AddDirEntry(e) {
				return
			}
			continue
		}
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			return
		}
		// Without fresh attributes the entry goes without them: stale ones
		// would overwrite what the kernel knows.
		if de.node == nil {
			continue
		}
		if a, ok := fs.localAttr(de.node); ok {
			fs.nodes.kernelRef(de.node, h.node, name)
			fs.fillEntry(eo, de.node, &a)
		} else if a, ok := fs.cache.attr(h.epoch, de.node.up); ok {
			fs.nodes.kernelRef(de.node, h.node, name)
			fs.fillEntry(eo, de.node, &a)
		}
	}
}

// releaseSnap lets go of a handle's hold on its listing.
func (fs *FS) releaseSnap(s *dirSnap) { s.release(fs.unpin) }

// gather adds an entry given to the kernel to the listing being filled;
// n is nil for "." and "..". Needs h.mu.
func (f *dirFill) gather(fs *FS, name string, n *node, a *upstream.Attr) {
	if n != nil {
		fs.nodes.pin(n)
	}
	f.add(name, n, a)
}

// finish caches the listing; it is abandoned if the cache refuses it.
func (f *dirFill) finish(fs *FS) {
	if !fs.cache.putListing(f.epoch, f.dir, f.gen, f.names, f.nodes, f.attrs) {
		f.abandon(fs)
	}
}

// abandon unpins what was gathered.
func (f *dirFill) abandon(fs *FS) {
	for _, n := range f.nodes {
		if n != nil {
			fs.unpin(n)
		}
	}
}

// treeBudget is how many entries one prefetch asks for.
const treeBudget = 8192

// prefetch asks the host for the listings of dir and the directories
// under it, breadth first, and caches them: a tree walk then finds its
// names and attributes in the guest. It reports whether dir's own
// listing was cached.
func (fs *FS) prefetch(ctx context.Context, dir *node, up, epoch uint64) (bool, error) {
	gen := fs.cache.fence(epoch)
	var resp upstream.TreeResp
	if err := fs.rpcFor(ctx, epoch, upstream.OpReadTree, &upstream.TreeReq{Node: up, MaxEntries: treeBudget}, &resp); err != nil {
		return false, err
	}
	known := map[uint64]*node{up: dir}
	cached := false
	for _, td := range resp.Dirs {
		f := &dirFill{epoch: epoch, dir: td.Node, gen: gen}
		parent := known[td.Node]
		for _, e := range td.Entries {
			var n *node
			if e.Entry.Node != 0 {
				n = fs.nodes.adopt(parent, e.Name, e.Entry.Node, epoch, &e.Entry.Attr)
				known[e.Entry.Node] = n
			}
			f.add(e.Name, n, direntAttr(&e))
		}
		if parent == nil || !fs.cache.putListing(epoch, td.Node, gen, f.names, f.nodes, f.attrs) {
			f.abandon(fs)
			continue
		}
		cached = cached || td.Node == up
	}
	return cached, nil
}

// add appends an entry whose node (if any) is pinned already.
func (f *dirFill) add(name string, n *node, a *upstream.Attr) {
	f.names = append(f.names, name)
	f.nodes = append(f.nodes, n)
	f.attrs = append(f.attrs, *a)
}

// direntAttr returns the attributes of a listed entry; for "." and "..",
// which carry none, its inode number and type.
func direntAttr(e *upstream.Dirent) *upstream.Attr {
	if e.Entry.Node == 0 {
		return &upstream.Attr{Ino: e.Ino, Mode: e.Mode}
	}
	return &e.Entry.Attr
}

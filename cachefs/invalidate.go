package cachefs

import (
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Kernel invalidation. The kernel caches entries, attributes, pages and
// directory listings for as long as the timeouts and open flags given
// to it allow; when what it holds may be wrong, the daemon tells it so
// with notify messages. These are never sent from a request handler or
// under a lock of the daemon: the kernel may wait on either.

// kernelName is a name the kernel may cache: name in directory parent.
type kernelName struct {
	parent uint64 // kernel nodeid
	name   string
}

// invalidateAll drops everything the guest caches, in the daemon and in
// the kernel, for example when the consistency policy changed.
func (fs *FS) invalidateAll() {
	negatives := fs.cache.purgeNegatives()
	ids, names := fs.nodes.snapshot()
	for _, up := range negatives {
		if n := fs.nodes.byHost(up.dir, fs.up.Epoch()); n != nil {
			names = append(names, kernelName{n.id, up.name})
		}
	}
	fs.notifyKernel(ids, names)
}

// notifyKernel invalidates the attributes and data of nodes and the
// names given. Unknown nodes and names are not an error.
func (fs *FS) notifyKernel(ids []uint64, names []kernelName) {
	srv := fs.fuseServer()
	if srv == nil {
		return
	}
	for _, id := range ids {
		srv.InodeNotify(id, 0, 0)
	}
	mounts := fs.overlayMountNames()
	for _, kn := range names {
		if !fs.expirer.expire(kn.parent, kn.name) && !mounts[kn] {
			srv.EntryNotify(kn.parent, kn.name)
		}
	}
}

func (fs *FS) fuseServer() *fuse.Server {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.server
}

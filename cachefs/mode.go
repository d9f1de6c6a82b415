package cachefs

import (
	"strings"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// modeOf returns the consistency mode of n's subtree, cached on the node
// until the policy or the tree's names change.
func (fs *FS) modeOf(n *node) consistency.Mode {
	fs.nodes.mu.Lock()
	gen := fs.policy.Generation()<<32 | fs.nodes.moves
	if n.modeGen == gen+1 {
		m := consistency.Mode(n.cmode)
		fs.nodes.mu.Unlock()
		return m
	}
	p, ok := fs.nodes.pathLocked(n)
	fs.nodes.mu.Unlock()
	m := consistency.Consistent // a node with no name left caches nothing
	if ok {
		m = fs.policy.ModeFor(p)
	}
	fs.nodes.mu.Lock()
	n.modeGen, n.cmode = gen+1, uint8(m)
	fs.nodes.mu.Unlock()
	return m
}

// pathLocked returns n's path from the mount root, as the policy names
// paths. Needs nodeTable.mu.
func (t *nodeTable) pathLocked(n *node) (string, bool) {
	var parts []string
	for ; n.id != rootID; n = n.parent {
		if n.parent == nil {
			return "", false
		}
		parts = append(parts, n.name)
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "/"), true
}

// cacheable reports whether a file of this type may be cached at all:
// sockets, fifos and devices never are.
func cacheable(mode uint32) bool {
	switch mode & sIFMT {
	case sIFREG, sIFDIR, sIFLNK:
		return true
	}
	return false
}

// mayCacheMeta reports whether n's attributes and names may be served
// from the guest.
func (fs *FS) mayCacheMeta(n *node) bool {
	return cacheable(n.mode) && fs.modeOf(n).MayCacheAttrs()
}

// timeouts returns the kernel entry and attribute timeouts for n.
func (fs *FS) timeouts(n *node, mode uint32) (entry, attr time.Duration) {
	if !cacheable(mode) {
		return 0, 0
	}
	d := fs.modeOf(n).KernelTimeout(fs.ttl)
	return d, d
}

// openFlags are the FOPEN_ flags for a file or directory of node n: the
// kernel keeps page cache and directory cache only where allowed.
func (fs *FS) openFlags(n *node) uint32 {
	if !cacheable(n.mode) || !fs.modeOf(n).MayCacheData() {
		return 0
	}
	if n.mode&sIFMT == sIFDIR {
		return fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_CACHE_DIR
	}
	return fuse.FOPEN_KEEP_CACHE
}

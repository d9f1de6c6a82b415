//go:build linux

package upstream

import (
	"strings"
	"sync"
	"syscall"

	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// node is an inode the guest knows by id. The server keeps no fd per
// node: it identifies the inode by file handle where the filesystem has
// them, else by (dev, ino) reached again through its parent and name
// (hostfs.Identity),
// and opens an O_PATH fd on demand through the session's fd cache.
type node struct {
	id     uint64         // immutable
	dev    uint64         // immutable
	ino    uint64         // immutable
	fmt    uint32         // immutable: S_IFMT bits
	handle *hostfs.Handle // immutable; nil when handles are unavailable

	// nodeTable.mu protects the following.
	refs   uint64 // lookups the guest holds
	parent *node  // a directory that held name when last seen
	name   string
	opens  int                   // open handles on this node
	locks  map[uint64]*ownerLock // POSIX lock owner: its lock fd (server_lock.go)
}

type devIno struct{ dev, ino uint64 }

// nodeTable maps guest-visible ids to nodes. Lock order: nodeTable.mu
// before fdCache.mu; no syscall is made under mu except closing fds.
type nodeTable struct {
	mu    sync.Mutex // protects the maps, next, and node fields marked above
	byID  map[uint64]*node
	byIno map[devIno]*node
	next  uint64
}

func newNodeTable(root *node) *nodeTable {
	t := &nodeTable{byID: map[uint64]*node{}, byIno: map[devIno]*node{}, next: RootID + 1}
	root.id = RootID
	root.refs = 1 << 62 // never forgotten
	t.byID[RootID] = root
	t.byIno[devIno{root.dev, root.ino}] = root
	return t
}

// get returns the node with id, or ESTALE.
func (t *nodeTable) get(id uint64) (*node, error) {
	t.mu.Lock()
	n := t.byID[id]
	t.mu.Unlock()
	if n == nil {
		return nil, syscall.ESTALE
	}
	return n, nil
}

// ref returns the node for the inode found as name in parent, creating
// it if new, and takes one guest reference on it.
func (t *nodeTable) ref(parent *node, name string, st *unix.Stat_t, h *hostfs.Handle) *node {
	key := devIno{st.Dev, st.Ino}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.byIno[key]
	if n == nil || n.fmt != st.Mode&unix.S_IFMT || !hostfs.Same(n.handle, h) {
		if n != nil { // inode number reused for a new file
			delete(t.byIno, key)
		}
		n = &node{id: t.next, dev: st.Dev, ino: st.Ino, fmt: st.Mode & unix.S_IFMT, handle: h}
		t.next++
		t.byID[n.id] = n
		t.byIno[key] = n
	}
	n.refs++
	n.parent, n.name = parent, name
	return n
}

// forget drops count guest references; it reports the nodes that are
// no longer referenced so the caller can drop their cached fds.
func (t *nodeTable) forget(id, count uint64) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.byID[id]
	if n == nil || id == RootID {
		return nil
	}
	if count >= n.refs {
		delete(t.byID, id)
		if t.byIno[devIno{n.dev, n.ino}] == n {
			delete(t.byIno, devIno{n.dev, n.ino})
		}
		return n
	}
	n.refs -= count
	return nil
}

// moved records that n is now name in parent.
func (t *nodeTable) moved(n, parent *node, name string) {
	t.mu.Lock()
	n.parent, n.name = parent, name
	t.mu.Unlock()
}

// lookupName returns the node last seen as name in parent, if known.
func (t *nodeTable) find(dev, ino uint64) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byIno[devIno{dev, ino}]
}

func (t *nodeTable) where(n *node) (*node, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return n.parent, n.name
}

// addOpen adds d to n's open handles and returns their number. With the
// last handle go the POSIX locks of every owner.
func (t *nodeTable) addOpen(n *node, d int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n.opens += d
	if d < 0 && n.opens == 0 {
		t.dropLocksLocked(n)
	}
	return n.opens
}

func (t *nodeTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// ParkPrefix begins the names at which a write-back parks an object
// between two of its passes (package overlay). They are the write-back's
// own: the server leaves them out of every listing, a lookup does not
// find them and the guest's name ops may not make them, so no program
// in the guest sees one; write-back ops reach them by path.
const ParkPrefix = ".cachefs-move-"

// Parked reports whether name is a park name (ParkPrefix).
func Parked(name string) bool { return strings.HasPrefix(name, ParkPrefix) }

// validName rejects names that are not a single component of the
// directory they are looked up in.
func validName(name string) error {
	if len(name) > 255 {
		return syscall.ENAMETOOLONG
	}
	if name == "" || name == "." || name == ".." {
		return syscall.EINVAL
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == 0 {
			return syscall.EINVAL
		}
	}
	return nil
}

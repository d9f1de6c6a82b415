package cachefs

import (
	"sync"

	"github.com/cachefs/cachefs/upstream"
)

// node is the guest's record of an inode the kernel knows. The kernel
// names it by id; the host by up, valid for one host session (epoch).
type node struct {
	id        uint64 // immutable: the kernel's nodeid
	guestMade bool   // immutable: created in the guest (delegated)

	// nodeTable.mu protects the following.
	up      uint64 // host node id in epoch
	epoch   uint64
	parent  *node // where the node was last seen, for re-resolution
	name    string
	mode    uint32 // S_IFMT bits
	ino     uint64 // host inode number, as last seen
	lookups uint64 // kernel references (nlookup)
	pins    uint64 // cached names that hold the node
	upRefs  uint64 // host references taken in epoch

	// noCaps: the guest created the file and set no security.capability
	// on it since, so the kernel's check before each write is answered
	// locally.
	noCaps bool
	// locks: advisory locks were taken on the node through some handle.
	locks bool
	// named: byName holds the node under its parent and name. dropped:
	// the node may not be in byID (it was removed once).
	named, dropped bool

	// mode cache: the subtree's mode as of policy generation modeGen.
	modeGen uint64
	cmode   uint8

	// local is the guest's own state of a node in a delegated subtree;
	// writeback.mu protects it (not nodeTable.mu).
	local *local
}

type upKey struct{ epoch, up uint64 }

type nameKey struct {
	parent *node
	name   string
}

// nodeTable maps kernel nodeids to nodes. Lock order: nodeTable.mu is a
// leaf; no upstream call is made while holding it.
type nodeTable struct {
	mu   sync.Mutex // protects the maps, next and node fields marked above
	byID map[uint64]*node
	byUp map[upKey]*node
	// byName indexes nodes by where they were last seen.
	byName map[nameKey]*node
	next   uint64
	moves  uint64 // renames seen; paths of nodes may have changed

	aliases inoAliases // immutable pointer; locks itself

	// dropRefs takes host references no node holds any more, for
	// forgetting upstream; called under mu, so it must not call back.
	dropRefs func(up, epoch, refs uint64) // immutable once set
}

const rootID = 1 // FUSE_ROOT_ID

func newNodeTable(rootUp, epoch uint64) *nodeTable {
	t := &nodeTable{byID: map[uint64]*node{}, byUp: map[upKey]*node{}, byName: map[nameKey]*node{}, next: rootID + 1,
		aliases: newInoAliases()}
	root := &node{id: rootID, up: rootUp, epoch: epoch, mode: sIFDIR, lookups: 1 << 62}
	t.byID[rootID] = root
	t.byUp[upKey{epoch, rootUp}] = root
	return t
}

func (t *nodeTable) get(id uint64) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// upOf returns n's host id if it is valid in epoch.
func (t *nodeTable) upOf(n *node, epoch uint64) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return n.up, n.epoch == epoch
}

// where returns n's parent and name.
func (t *nodeTable) where(n *node) (*node, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return n.parent, n.name
}

// add records a host entry found as name in parent, which the kernel is
// about to be given: one kernel lookup and one host reference.
func (t *nodeTable) add(parent *node, name string, up, epoch uint64, a *upstream.Attr) *node {
	return t.addRefs(parent, name, up, epoch, a, 1, 0)
}

// adopt records a host entry that only the cache holds: one pin and one
// host reference.
func (t *nodeTable) adopt(parent *node, name string, up, epoch uint64, a *upstream.Attr) *node {
	return t.addRefs(parent, name, up, epoch, a, 0, 1)
}

func (t *nodeTable) addRefs(parent *node, name string, up, epoch uint64, a *upstream.Attr, lookups, pins uint64) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := upKey{epoch, up}
	n := t.byUp[k]
	if n == nil {
		n = t.freshByNameLocked(parent, name, a)
		if n == nil {
			n = t.olderByNameLocked(parent, name, a, epoch)
		}
		if n != nil { // made in the guest, or known in an older session: the same node
			t.unbindLocked(n)
			n.up, n.epoch, n.upRefs = up, epoch, 0
			t.byUp[k] = n
		}
	}
	if n == nil {
		n = &node{id: t.next, up: up, epoch: epoch, mode: a.Mode & sIFMT}
		t.next++
		t.byID[n.id] = n
		t.byUp[k] = n
	}
	n.ino = a.Ino
	n.lookups += lookups
	n.pins += pins
	n.upRefs++
	t.setWhereLocked(n, parent, name)
	return n
}

// kernelRef records that the kernel is given n, found in the cache as
// name in parent: one kernel lookup, no host reference.
func (t *nodeTable) kernelRef(n, parent *node, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.dropped { // cannot happen while the cache pins n
		t.byID[n.id], n.dropped = n, false
	}
	n.lookups++
	if !n.named || n.parent != parent || n.name != name {
		t.setWhereLocked(n, parent, name)
	}
}

// pin records one more cached name holding n.
func (t *nodeTable) pin(n *node) {
	t.mu.Lock()
	n.pins++
	t.mu.Unlock()
}

// unpin drops a cached name's hold on n; see forget for the result.
func (t *nodeTable) unpin(n *node) (up, epoch, refs uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.pins > 0 {
		n.pins--
	}
	return t.dropLocked(n)
}

// setWhereLocked records that n is name in parent (nil parent: nowhere).
func (t *nodeTable) setWhereLocked(n, parent *node, name string) {
	if n.named {
		delete(t.byName, nameKey{n.parent, n.name})
		n.named = false
	}
	n.parent, n.name = parent, name
	if parent != nil {
		k := nameKey{parent, name}
		if o := t.byName[k]; o != nil {
			o.named = false
		}
		t.byName[k], n.named = n, true
	}
}

// rebind points n at a host id of a new epoch after re-resolution; the
// lookup that found it took one host reference.
func (t *nodeTable) rebind(n *node, up, epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.epoch == epoch {
		t.upRefs(n, 1)
		return
	}
	delete(t.byUp, upKey{n.epoch, n.up})
	n.up, n.epoch, n.upRefs = up, epoch, 1
	t.byUp[upKey{epoch, up}] = n
}

// upRefs adds refs to n's host references. Needs mu.
func (t *nodeTable) upRefs(n *node, refs uint64) { n.upRefs += refs }

// forget drops count kernel lookups. When none remain the node is
// removed and its host references returned for forgetting upstream.
func (t *nodeTable) forget(id, count uint64) (up, epoch, refs uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.byID[id]
	if n == nil || id == rootID {
		return 0, 0, 0
	}
	n.lookups -= min(count, n.lookups)
	return t.dropLocked(n)
}

// dropLocked removes n once neither the kernel nor the cache holds it,
// returning its host references for forgetting upstream.
func (t *nodeTable) dropLocked(n *node) (up, epoch, refs uint64) {
	if n.lookups > 0 || n.pins > 0 || n.id == rootID || t.byID[n.id] != n {
		return 0, 0, 0
	}
	delete(t.byID, n.id)
	n.dropped = true
	if t.byUp[upKey{n.epoch, n.up}] == n {
		delete(t.byUp, upKey{n.epoch, n.up})
	}
	t.setWhereLocked(n, nil, "")
	return n.up, n.epoch, n.upRefs
}

// moved records a rename done through the mount; a node it replaced
// has no name any more.
func (t *nodeTable) moved(parent *node, name string, newParent *node, newName string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.moves++
	if old := t.byName[nameKey{newParent, newName}]; old != nil {
		t.setWhereLocked(old, nil, "")
		t.aliases.remove(old.ino)
	}
	if n := t.byName[nameKey{parent, name}]; n != nil {
		t.setWhereLocked(n, newParent, newName)
	}
}

// exchanged records a RENAME_EXCHANGE done through the mount.
func (t *nodeTable) exchanged(p1 *node, n1 string, p2 *node, n2 string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.moves++
	a, b := t.byName[nameKey{p1, n1}], t.byName[nameKey{p2, n2}]
	for _, n := range []*node{a, b} {
		if n != nil {
			t.setWhereLocked(n, nil, "")
		}
	}
	if a != nil {
		t.setWhereLocked(a, p2, n2)
	}
	if b != nil {
		t.setWhereLocked(b, p1, n1)
	}
}

// removed records that name in parent is gone.
func (t *nodeTable) removed(parent *node, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.byName[nameKey{parent, name}]; n != nil {
		t.setWhereLocked(n, nil, "")
		t.aliases.remove(n.ino)
	}
}

// child returns the node last seen as name in parent, if any.
func (t *nodeTable) child(parent *node, name string) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byName[nameKey{parent, name}]
}

func (t *nodeTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// setNoCaps records whether n is known to have no security.capability.
func (t *nodeTable) setNoCaps(n *node, v bool) {
	t.mu.Lock()
	n.noCaps = v
	t.mu.Unlock()
}

func (t *nodeTable) hasNoCaps(n *node) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return n.noCaps
}

// snapshot lists every node's id and the names the kernel knows them by.
func (t *nodeTable) snapshot() ([]uint64, []kernelName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]uint64, 0, len(t.byID))
	names := make([]kernelName, 0, len(t.byName))
	for id := range t.byID {
		ids = append(ids, id)
	}
	for k := range t.byName {
		names = append(names, kernelName{k.parent.id, k.name})
	}
	return ids, names
}

// byHost returns the node of a host id in epoch, if known.
func (t *nodeTable) byHost(up, epoch uint64) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byUp[upKey{epoch, up}]
}

// addLocal records a node the guest created in a delegated subtree and
// the host does not have yet: it has no host id (epoch 0 is never
// current, so a host id is looked up by name once it is written back).
func (t *nodeTable) addLocal(parent *node, name string, mode uint32) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := &node{id: t.next, mode: mode & sIFMT, lookups: 1, guestMade: true}
	t.next++
	t.byID[n.id] = n
	t.setWhereLocked(n, parent, name)
	return n
}

// path returns n's path from the mount root.
func (t *nodeTable) path(n *node) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pathLocked(n)
}

// inoOf returns n's host inode number, 0 if not known yet.
func (t *nodeTable) inoOf(n *node) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return n.ino
}

// setIno records n's host inode number, learnt from write-back.
func (t *nodeTable) setIno(n *node, ino uint64) {
	t.mu.Lock()
	n.ino = ino
	t.mu.Unlock()
	if n.guestMade {
		t.aliases.add(ino, localIno(n))
	}
}

// setLocked records that locks were taken on n.
func (t *nodeTable) setLocked(n *node) {
	t.mu.Lock()
	n.locks = true
	t.mu.Unlock()
}

func (t *nodeTable) hasLocks(n *node) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return n.locks
}

// freshByNameLocked returns the node made in the guest that is known as
// name in parent, if it is a's type and either not yet bound to a host id
// or is a's inode under another host id (the host's node for a name can
// change, with a rename, while the guest's node stays).
func (t *nodeTable) freshByNameLocked(parent *node, name string, a *upstream.Attr) *node {
	n := t.byName[nameKey{parent, name}]
	if n == nil || !n.guestMade || n.mode != a.Mode&sIFMT {
		return nil
	}
	if n.up != 0 && (n.ino == 0 || n.ino != a.Ino) {
		return nil
	}
	return n
}

// olderByNameLocked returns the node known as name in parent in an
// older host session if it is the file found now (same type and inode
// number): the kernel keeps its nodeid, so its dentry stays valid (a
// new nodeid for the same name would make the kernel drop the dentry,
// and detach whatever is mounted on it). Needs mu.
func (t *nodeTable) olderByNameLocked(parent *node, name string, a *upstream.Attr, epoch uint64) *node {
	n := t.byName[nameKey{parent, name}]
	if n == nil || n.epoch == epoch || n.ino == 0 || n.ino != a.Ino || n.mode != a.Mode&sIFMT {
		return nil
	}
	return n
}

// unbindLocked drops n's host id, handing its references to be forgotten.
// Needs mu.
func (t *nodeTable) unbindLocked(n *node) {
	if n.up == 0 {
		return
	}
	if t.byUp[upKey{n.epoch, n.up}] == n {
		delete(t.byUp, upKey{n.epoch, n.up})
	}
	if t.dropRefs != nil {
		t.dropRefs(n.up, n.epoch, n.upRefs)
	}
	n.up, n.epoch, n.upRefs = 0, 0, 0
}

// inKernel reports whether the kernel holds n (has looked it up).
func (t *nodeTable) inKernel(n *node) bool {
	if n == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return n.lookups > 0
}

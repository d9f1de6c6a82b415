package cachefs

import (
	"sync"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// metaCache is the guest's metadata cache for subtrees whose mode allows
// it: attributes by host node id, and per directory the names looked up
// in it (positive and negative) and, once read whole, its listing.
//
// A positive name pins its child node (node.pins) so that the node and
// its host references outlive the kernel forgetting it; unpin is called
// when the name leaves the cache. Everything is keyed by host node id in
// one epoch: a new host session starts from an empty cache.
//
// Racing fills are fenced by generations: a filler takes a fence before
// its upstream request, and its result is dropped if the directory, or
// the node whose attributes it fetched, was invalidated meanwhile.
// Without the attribute fence a GETATTR answered before a guest write
// reached the host could cache the old size after the write dropped it.
type metaCache struct {
	ttl   time.Duration    // immutable
	pin   func(n *node)    // immutable: called under mu
	unpin func(n *node)    // immutable: called under mu
	now   func() time.Time // immutable

	mu        sync.Mutex // protects the following
	epoch     uint64
	dirs      *costLRU[uint64, *dirCache]
	attrs     *costLRU[uint64, attrEntry]
	gens      map[uint64]uint64 // generation of dirs not cached, once invalidated
	floor     uint64            // generation of dirs neither cached nor in gens
	gen       uint64            // last generation handed out
	drops     map[uint64]uint64 // generation of nodes' last attribute drop
	dropFloor uint64            // generation of drops not in drops
	stats     CacheStats
}

// CacheStats count the metadata cache's work.
type CacheStats struct {
	Hits, Misses, Dropped, Invalidations uint64
	Dirs, Attrs                          int
}

type attrEntry struct {
	attr    upstream.Attr
	expires time.Time
	noXattr []string // extended attributes the host said the node lacks
	dense   bool     // the host said the file has no holes (SEEK_HOLE from 0 was its size)
}

// dirCache is what is known of one directory.
type dirCache struct {
	gen      uint64
	names    map[string]dentry
	complete bool      // names holds the whole directory, in order
	order    []string  // listing order, when complete
	expires  time.Time // of the listing
	cost     int
	// snap is the listing as directory handles are served it, made on
	// the first open after a change and shared until the next one.
	snap *dirSnap
}

// dentry is a cached name; a nil node means the name does not exist,
// except for "." and ".." in a listing. attr is as the name was found;
// attributes to give the kernel come from the attribute cache.
type dentry struct {
	node    *node
	attr    upstream.Attr
	expires time.Time
}

// CacheLimits bound the metadata cache's memory. Zero fields take
// defaults.
type CacheLimits struct {
	DirBytes  int // names and listings; 0: 64 MiB
	AttrBytes int // attributes; 0: 16 MiB
}

// Estimated bytes per cached attribute and name (with its node).
const (
	attrCost   = 160
	dentryCost = 240
)

func newMetaCache(ttl time.Duration, lim CacheLimits, pin, unpin func(*node)) *metaCache {
	if lim.DirBytes == 0 {
		lim.DirBytes = 64 << 20
	}
	if lim.AttrBytes == 0 {
		lim.AttrBytes = 16 << 20
	}
	c := &metaCache{ttl: ttl, pin: pin, unpin: unpin, now: time.Now, gens: map[uint64]uint64{}, drops: map[uint64]uint64{}}
	c.dirs = newCostLRU[uint64, *dirCache](lim.DirBytes, func(d *dirCache) int { return d.cost }, c.evictDir)
	c.attrs = newCostLRU[uint64, attrEntry](lim.AttrBytes, func(attrEntry) int { return attrCost }, nil)
	return c
}

// evictDir unpins a directory's names. Runs under mu.
func (c *metaCache) evictDir(dir uint64, d *dirCache) {
	c.setGenLocked(dir, d.gen)
	c.dropSnapLocked(d)
	for _, de := range d.names {
		if de.node != nil {
			c.unpin(de.node)
		}
	}
}

// syncLocked empties the cache when the host session changed.
func (c *metaCache) syncLocked(epoch uint64) {
	if epoch != c.epoch {
		c.dirs.purge()
		c.attrs.purge()
		c.gen++
		c.gens, c.floor = map[uint64]uint64{}, c.gen
		c.drops, c.dropFloor = map[uint64]uint64{}, c.gen
		c.epoch = epoch
	}
}

func (c *metaCache) uncachedGenLocked(dir uint64) uint64 {
	if g, ok := c.gens[dir]; ok {
		return g
	}
	return c.floor
}

// maxGens bounds the generations kept for uncached directories, and for
// attribute drops; past it they are all superseded by a new floor.
const maxGens = 1 << 16

func (c *metaCache) setGenLocked(dir, gen uint64) {
	if len(c.gens) >= maxGens {
		c.gen++
		c.gens, c.floor = map[uint64]uint64{}, c.gen
		return
	}
	c.gens[dir] = gen
}

// fence returns the generation fills pass as gen: they are refused if
// the directory, or a node whose attributes they carry, is invalidated
// after it. Take it before the upstream request whose answer fills.
func (c *metaCache) fence(epoch uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	return c.gen
}

// dirLocked returns dir's cache entry if it was not invalidated after
// gen, creating it if needed. Generations only grow, so a directory
// invalidated later has a generation above gen.
func (c *metaCache) dirLocked(epoch, dir, gen uint64) *dirCache {
	c.syncLocked(epoch)
	if d, ok := c.dirs.get(dir); ok {
		if d.gen > gen {
			return nil
		}
		return d
	}
	cur := c.uncachedGenLocked(dir)
	if cur > gen {
		return nil
	}
	delete(c.gens, dir)
	d := &dirCache{gen: cur, names: map[string]dentry{}}
	c.dirs.add(dir, d)
	return d
}

// lookup answers a name from the cache: ok reports a fresh answer, and
// a nil node in it means the name does not exist.
func (c *metaCache) lookup(epoch, dir uint64, name string) (dentry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	now := c.now()
	d, ok := c.dirs.get(dir)
	if ok {
		if de, found := d.names[name]; found && now.Before(de.expires) {
			c.stats.Hits++
			return de, true
		} else if !found && d.complete && now.Before(d.expires) {
			c.stats.Hits++
			return dentry{}, true
		}
	}
	c.stats.Misses++
	return dentry{}, false
}

// entry answers a lookup in full from the cache, under one lock: the
// name's dentry and, for a positive one, its node's attributes. It
// counts what lookup and attr would count for the same answer; when not
// ok (the name or the attributes are not fresh) it counts nothing, and
// the caller asks lookup and attr.
func (c *metaCache) entry(epoch, dir uint64, name string) (dentry, upstream.Attr, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	now := c.now()
	d, ok := c.dirs.get(dir)
	if !ok {
		return dentry{}, upstream.Attr{}, false
	}
	de, found := d.names[name]
	switch {
	case !found && d.complete && now.Before(d.expires):
		c.stats.Hits++
		return dentry{}, upstream.Attr{}, true
	case !found || !now.Before(de.expires):
		return dentry{}, upstream.Attr{}, false
	case de.node == nil:
		c.stats.Hits++
		return de, upstream.Attr{}, true
	}
	e, ok := c.attrs.get(de.node.up)
	if !ok || !now.Before(e.expires) {
		return dentry{}, upstream.Attr{}, false
	}
	c.stats.Hits += 2
	return de, e.attr, true
}

// peekName returns the node cached as name in dir, if any, fresh or not.
func (c *metaCache) peekName(epoch, dir uint64, name string) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	if d, ok := c.dirs.peek(dir); ok {
		return d.names[name].node
	}
	return nil
}

// putName caches name in dir as n (nil: absent) with attributes a. It
// reports false if dir changed since gen; then nothing was cached.
func (c *metaCache) putName(epoch, dir, gen uint64, name string, n *node, a *upstream.Attr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirLocked(epoch, dir, gen)
	if d == nil {
		c.stats.Dropped++
		return false
	}
	de := dentry{node: n, expires: c.now().Add(c.ttl)}
	if a != nil && n != nil {
		de.attr = *a
		c.putAttrLocked(n.up, gen, a)
	}
	c.setNameLocked(d, name, de)
	return true
}

// setNameLocked replaces a name, unpinning the node it held.
func (c *metaCache) setNameLocked(d *dirCache, name string, de dentry) {
	c.dropSnapLocked(d)
	old, had := d.names[name]
	if had && old.node != nil {
		c.unpin(old.node)
	}
	d.names[name] = de
	if !had {
		d.cost += dentryCost + len(name)
		c.dirs.resized(d.cost-dentryCost-len(name), d.cost)
	}
}

// listing returns dir's whole listing if cached and fresh, held for the
// caller until it calls release.
func (c *metaCache) listing(epoch, dir uint64) (*dirSnap, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	d, ok := c.dirs.get(dir)
	if !ok || !d.complete || !c.now().Before(d.expires) {
		c.stats.Misses++
		return nil, false
	}
	c.stats.Hits++
	if d.snap == nil {
		ents := make([]dentry, len(d.order))
		for i, name := range d.order {
			ents[i] = d.names[name]
		}
		d.snap = newDirSnap(d.order, ents, c.pin)
	}
	d.snap.refs.Add(1)
	return d.snap, true
}

// dropSnapLocked lets go of the cache's hold on d's shared listing,
// which handles may still be reading.
func (c *metaCache) dropSnapLocked(d *dirCache) {
	if d.snap != nil {
		d.snap.release(c.unpin)
		d.snap = nil
	}
}

// putListing caches dir's whole listing: names in order, nodes[i] and
// attrs[i] for each (nodes pinned by the caller, one pin per entry,
// which the cache takes over). It reports false, taking nothing, if dir
// changed since gen.
func (c *metaCache) putListing(epoch, dir, gen uint64, names []string, nodes []*node, attrs []upstream.Attr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirLocked(epoch, dir, gen)
	if d == nil {
		c.stats.Dropped++
		return false
	}
	exp := c.now().Add(c.ttl)
	c.dropSnapLocked(d)
	for name, de := range d.names {
		if de.node != nil {
			c.unpin(de.node)
		}
		delete(d.names, name)
	}
	old := d.cost
	d.cost = 0
	for i, name := range names {
		d.cost += dentryCost + len(name)
		d.names[name] = dentry{node: nodes[i], attr: attrs[i], expires: exp}
		if nodes[i] != nil { // nil for "." and "..", which are never looked up
			c.putAttrLocked(nodes[i].up, gen, &attrs[i])
		}
	}
	d.order, d.complete, d.expires = names, true, exp
	c.dirs.resized(old, d.cost)
	return true
}

// attr returns n's cached attributes if fresh.
func (c *metaCache) attr(epoch, up uint64) (upstream.Attr, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	if e, ok := c.attrs.get(up); ok && c.now().Before(e.expires) {
		c.stats.Hits++
		return e.attr, true
	}
	c.stats.Misses++
	return upstream.Attr{}, false
}

// putAttr caches attributes fetched from the host after fence gen. It
// reports false, caching nothing, if they were dropped since.
func (c *metaCache) putAttr(epoch, up, gen uint64, a *upstream.Attr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	return c.putAttrLocked(up, gen, a)
}

func (c *metaCache) putAttrLocked(up, gen uint64, a *upstream.Attr) bool {
	if c.droppedLocked(up) > gen {
		c.stats.Dropped++
		return false
	}
	c.attrs.add(up, attrEntry{attr: *a, expires: c.now().Add(c.ttl)})
	return true
}

// xattrAbsent reports whether name is known missing on a node whose
// attributes are fresh, or whether the node has no xattrs at all (name
// ""): the host says so with the attributes (AttrNoXattrs), or said the
// name was missing since; changes that drop the attributes drop this too.
func (c *metaCache) xattrAbsent(epoch, up uint64, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	e, ok := c.attrs.peek(up)
	if !ok || !c.now().Before(e.expires) {
		return false
	}
	if e.attr.Flags&upstream.AttrNoXattrs != 0 {
		c.stats.Hits++
		return true
	}
	for _, n := range e.noXattr {
		if n == name {
			c.stats.Hits++
			return true
		}
	}
	return false
}

// noteXattrAbsent records that the host said up lacks name.
func (c *metaCache) noteXattrAbsent(epoch, up uint64, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	if e, ok := c.attrs.peek(up); ok && len(e.noXattr) < 8 {
		e.noXattr = append(e.noXattr, name)
		c.attrs.lru.Add(up, e)
	}
}

// denseSize returns the size of a file whose attributes are fresh and
// which the host said has no holes.
func (c *metaCache) denseSize(epoch, up uint64) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	e, ok := c.attrs.peek(up)
	if !ok || !e.dense || !c.now().Before(e.expires) {
		return 0, false
	}
	c.stats.Hits++
	return e.attr.Size, true
}

// noteDense records that the host said up has no holes below size, as
// asked after fence gen: nothing is recorded if the attributes were
// dropped since, or say another size.
func (c *metaCache) noteDense(epoch, up, gen, size uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	if e, ok := c.attrs.peek(up); ok && c.droppedLocked(up) <= gen && e.attr.Size == size {
		e.dense = true
		c.attrs.lru.Add(up, e)
	}
}

// droppedLocked returns the generation at which up's attributes were
// last dropped (a floor for all after a purge). Needs c.mu.
func (c *metaCache) droppedLocked(up uint64) uint64 {
	if dropped, ok := c.drops[up]; ok {
		return dropped
	}
	return c.dropFloor
}

// changedSince reports whether up's attributes were dropped after fence
// gen: what was read of the node since may be stale.
func (c *metaCache) changedSince(epoch, up, gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(epoch)
	return c.droppedLocked(up) > gen
}

// dropAttr forgets a node's attributes and fences fills in flight.
func (c *metaCache) dropAttr(up uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attrs.remove(up)
	c.gen++
	if len(c.drops) >= maxGens {
		c.drops, c.dropFloor = map[uint64]uint64{}, c.gen
	} else {
		c.drops[up] = c.gen
	}
	c.stats.Invalidations++
}

// dropDir forgets what is known of a directory's names and fences
// fills in flight.
func (c *metaCache) dropDir(dir uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.dirs.remove(dir)         // evictDir records the old generation ...
	c.setGenLocked(dir, c.gen) // ... which this supersedes
	c.stats.Invalidations++
}

// hostName is a name in a directory known by host id.
type hostName struct {
	dir  uint64
	name string
}

// purgeNegatives empties the cache and returns the names it held as
// absent, which the kernel may hold as negative entries too.
func (c *metaCache) purgeNegatives() []hostName {
	c.mu.Lock()
	var neg []hostName
	for _, dir := range c.dirs.lru.Keys() {
		d, _ := c.dirs.peek(dir)
		for name, de := range d.names {
			if de.node == nil {
				neg = append(neg, hostName{dir, name})
			}
		}
	}
	c.mu.Unlock()
	c.purge()
	return neg
}

// purge empties the cache.
func (c *metaCache) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dirs.purge()
	c.gen++
	c.gens, c.floor = map[uint64]uint64{}, c.gen
	c.drops, c.dropFloor = map[uint64]uint64{}, c.gen
	c.attrs.purge()
	c.stats.Invalidations++
}

func (c *metaCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Dirs, s.Attrs = c.dirs.len(), c.attrs.len()
	return s
}

package cachefs

import (
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// testCache returns a cache whose unpins are counted per node id.
func testCache(lim CacheLimits) (*metaCache, map[uint64]int) {
	c, _, unpins := testCachePins(lim)
	return c, unpins
}

// testCachePins returns a cache whose pins and unpins are counted per
// node id.
func testCachePins(lim CacheLimits) (*metaCache, map[uint64]int, map[uint64]int) {
	pins, unpins := map[uint64]int{}, map[uint64]int{}
	c := newMetaCache(time.Hour, lim, func(n *node) { pins[n.id]++ }, func(n *node) { unpins[n.id]++ })
	return c, pins, unpins
}

func TestCacheNames(t *testing.T) {
	c, unpins := testCache(CacheLimits{})
	n := &node{id: 7, up: 70}
	gen := c.fence(1)
	if !c.putName(1, 5, gen, "a", n, &upstream.Attr{Size: 3}) {
		t.Fatal("putName refused a fresh fill")
	}
	c.putName(1, 5, gen, "missing", nil, nil)
	if de, ok := c.lookup(1, 5, "a"); !ok || de.node != n {
		t.Errorf("lookup a = %+v, %v; want node 7", de, ok)
	}
	if de, ok := c.lookup(1, 5, "missing"); !ok || de.node != nil {
		t.Errorf("lookup missing = %+v, %v; want a negative entry", de, ok)
	}
	if _, ok := c.lookup(1, 5, "other"); ok {
		t.Error("lookup of an unknown name in an incomplete directory hit")
	}
	if a, ok := c.attr(1, 70); !ok || a.Size != 3 {
		t.Errorf("attr = %+v, %v; want size 3", a, ok)
	}
	c.dropDir(5)
	if unpins[7] != 1 {
		t.Errorf("dropDir unpinned node 7 %d times, want 1", unpins[7])
	}
	if _, ok := c.lookup(1, 5, "a"); ok {
		t.Error("lookup hit after dropDir")
	}
}

func TestCacheFillRacingInvalidation(t *testing.T) {
	c, _ := testCache(CacheLimits{})
	gen := c.fence(1)
	c.dropDir(5) // the directory changed while the fill was in flight
	if c.putName(1, 5, gen, "a", &node{id: 2}, &upstream.Attr{}) {
		t.Error("a fill begun before an invalidation was cached")
	}
	if c.putListing(1, 5, gen, []string{"a"}, []*node{{id: 2}}, []upstream.Attr{{}}) {
		t.Error("a listing begun before an invalidation was cached")
	}
	if !c.putName(1, 5, c.fence(1), "a", &node{id: 2}, &upstream.Attr{}) {
		t.Error("a fill begun after the invalidation was refused")
	}
}

// A GETATTR answered before a guest write reached the host must not
// cache its attributes after the write dropped them: a later GETATTR
// would get the old size from the cache.
func TestCacheAttrFillRacingDrop(t *testing.T) {
	c, _ := testCache(CacheLimits{})
	gen := c.fence(1)
	c.dropAttr(70) // the node changed while the fill was in flight
	if c.putAttr(1, 70, gen, &upstream.Attr{Size: 1}) {
		t.Error("attributes fetched before a drop were cached")
	}
	if _, ok := c.attr(1, 70); ok {
		t.Error("attr hit after a refused fill")
	}
	if !c.putAttr(1, 71, gen, &upstream.Attr{Size: 2}) {
		t.Error("a fill of another node was refused")
	}
	n := &node{id: 7, up: 70}
	if !c.putName(1, 5, gen, "a", n, &upstream.Attr{Size: 1}) {
		t.Error("putName refused though its directory did not change")
	}
	if _, ok := c.attr(1, 70); ok {
		t.Error("putName cached attributes fetched before a drop")
	}
	if !c.putAttr(1, 70, c.fence(1), &upstream.Attr{Size: 3}) {
		t.Error("a fill begun after the drop was refused")
	}
	if a, ok := c.attr(1, 70); !ok || a.Size != 3 {
		t.Errorf("attr = %+v, %v; want size 3", a, ok)
	}
}

// Past maxGens drops the map is replaced by a floor that refuses every
// fill begun before it.
func TestCacheAttrDropsBounded(t *testing.T) {
	c, _ := testCache(CacheLimits{})
	gen := c.fence(1)
	for i := uint64(0); i <= maxGens; i++ {
		c.dropAttr(1000 + i)
	}
	if len(c.drops) > maxGens {
		t.Errorf("%d drops kept, want at most %d", len(c.drops), maxGens)
	}
	if c.putAttr(1, 5, gen, &upstream.Attr{}) {
		t.Error("a fill begun before the floor was cached")
	}
	if !c.putAttr(1, 5, c.fence(1), &upstream.Attr{}) {
		t.Error("a fill begun after the floor was refused")
	}
}

func TestCacheListingAnswersNegatives(t *testing.T) {
	c, _ := testCache(CacheLimits{})
	nodes := []*node{nil, {id: 3, up: 30}}
	if !c.putListing(1, 5, c.fence(1), []string{".", "x"}, nodes, make([]upstream.Attr, 2)) {
		t.Fatal("putListing refused")
	}
	if de, ok := c.lookup(1, 5, "y"); !ok || de.node != nil {
		t.Errorf("lookup of a name absent from a complete listing = %+v, %v; want negative hit", de, ok)
	}
	s, ok := c.listing(1, 5)
	if !ok || len(s.names) != 2 {
		t.Fatalf("listing = %v, %v", s, ok)
	}
}

// Opens of a cached directory share one listing: no pin per entry per
// open, and its nodes stay pinned until the cache and every handle let
// go, even after the directory changed.
func TestCacheListingShared(t *testing.T) {
	c, pins, unpins := testCachePins(CacheLimits{})
	x := &node{id: 3, up: 30}
	if !c.putListing(1, 5, c.fence(1), []string{".", "x"}, []*node{nil, x}, make([]upstream.Attr, 2)) {
		t.Fatal("putListing refused")
	}
	s1, _ := c.listing(1, 5)
	s2, _ := c.listing(1, 5)
	if s1 != s2 || pins[3] != 1 {
		t.Fatalf("two opens: same snapshot %v, %d pins of x; want one shared snapshot, 1 pin", s1 == s2, pins[3])
	}
	s1.release(c.unpin)
	// A change makes the next open see a new listing; the old one is
	// still whole for the handle reading it.
	c.putName(1, 5, c.fence(1), "y", &node{id: 4, up: 40}, &upstream.Attr{})
	if unpins[3] != 0 {
		t.Fatalf("x unpinned %d times while a handle reads the old listing", unpins[3])
	}
	if s2.ents[1].node != x || len(s2.names) != 2 {
		t.Errorf("old listing changed under its handle: %v", s2.names)
	}
	s2.release(c.unpin)
	if unpins[3] != 1 {
		t.Errorf("x unpinned %d times after the last holder let go, want 1", unpins[3])
	}
}

func TestCacheBoundedAndEvictionUnpins(t *testing.T) {
	c, unpins := testCache(CacheLimits{DirBytes: 10 * dentryCost, AttrBytes: 5 * attrCost})
	for i := uint64(1); i <= 100; i++ {
		c.putName(1, i, c.fence(1), "n", &node{id: i, up: i}, &upstream.Attr{})
	}
	st := c.Stats()
	if st.Dirs > 10 || st.Attrs > 5 {
		t.Errorf("cache holds %d dirs and %d attrs, over its bounds", st.Dirs, st.Attrs)
	}
	evicted := 0
	for _, k := range unpins {
		evicted += k
	}
	if evicted != 100-st.Dirs {
		t.Errorf("%d unpins for %d evicted directories", evicted, 100-st.Dirs)
	}
	// An evicted directory refuses fills begun before its eviction only
	// if it was invalidated; a new fill works.
	if !c.putName(1, 1, c.fence(1), "n", &node{id: 1, up: 1}, &upstream.Attr{}) {
		t.Error("refill of an evicted directory refused")
	}
}

func TestCacheExpires(t *testing.T) {
	c, _ := testCache(CacheLimits{})
	now := time.Now()
	c.now = func() time.Time { return now }
	c.putName(1, 5, c.fence(1), "a", &node{id: 2, up: 20}, &upstream.Attr{})
	now = now.Add(2 * time.Hour)
	if _, ok := c.lookup(1, 5, "a"); ok {
		t.Error("lookup hit after the TTL")
	}
	if _, ok := c.attr(1, 20); ok {
		t.Error("attr hit after the TTL")
	}
}

func TestCacheNewEpochStartsEmpty(t *testing.T) {
	c, _ := testCache(CacheLimits{})
	c.putName(1, 5, c.fence(1), "a", &node{id: 2, up: 20}, &upstream.Attr{})
	if _, ok := c.lookup(2, 5, "a"); ok {
		t.Error("a name from an old host session answered in a new one")
	}
}

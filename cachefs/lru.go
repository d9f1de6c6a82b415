package cachefs

import (
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// costLRU is an LRU bounded by the total cost of its values (an estimate
// of their bytes) rather than their count. Not safe for concurrent use:
// its owner locks.
type costLRU[K comparable, V any] struct {
	lru     *simplelru.LRU[K, V]
	cost    func(V) int // immutable
	total   int
	max     int // immutable
	onEvict func(K, V)
}

func newCostLRU[K comparable, V any](max int, cost func(V) int, onEvict func(K, V)) *costLRU[K, V] {
	c := &costLRU[K, V]{cost: cost, max: max, onEvict: onEvict}
	// The count bound is never reached: cost evicts first.
	c.lru, _ = simplelru.NewLRU[K, V](1<<31-1, func(k K, v V) {
		c.total -= c.cost(v)
		if c.onEvict != nil {
			c.onEvict(k, v)
		}
	})
	return c
}

func (c *costLRU[K, V]) get(k K) (V, bool) { return c.lru.Get(k) }

func (c *costLRU[K, V]) peek(k K) (V, bool) { return c.lru.Peek(k) }

// add inserts or replaces k (the old value is evicted through onEvict)
// and evicts the oldest entries until the bound holds.
func (c *costLRU[K, V]) add(k K, v V) {
	c.lru.Remove(k)
	c.total += c.cost(v)
	c.lru.Add(k, v)
	for c.total > c.max && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
}

// resized accounts for a value whose cost changed from old in place.
func (c *costLRU[K, V]) resized(old, now int) {
	c.total += now - old
	for c.total > c.max && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
}

func (c *costLRU[K, V]) remove(k K) { c.lru.Remove(k) }

func (c *costLRU[K, V]) purge() { c.lru.Purge() }

func (c *costLRU[K, V]) len() int { return c.lru.Len() }

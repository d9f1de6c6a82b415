//go:build linux

package upstream

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sys/unix"
)

// fdRef is a reference-counted file descriptor. The cache holds one
// reference while the fd is cached; each user holds one while using it.
// The fd is closed when the last reference is released, so eviction
// never closes an fd under a request that is using it.
type fdRef struct {
	fd   int
	refs atomic.Int32
}

// acquire takes a reference unless the fd has been closed already.
func (r *fdRef) acquire() bool {
	for {
		n := r.refs.Load()
		if n <= 0 {
			return false
		}
		if r.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (r *fdRef) release() {
	if r.refs.Add(-1) == 0 {
		unix.Close(r.fd)
	}
}

// fdCache bounds the server's open file descriptors: O_PATH fds of
// nodes, and fds of open files and directories, all reopened on demand.
type fdCache struct {
	mu  sync.Mutex // protects lru
	lru *simplelru.LRU[any, *fdRef]

	opened  atomic.Uint64 // fds opened into the cache
	evicted atomic.Uint64
}

func newFDCache(size int) *fdCache {
	c := &fdCache{}
	c.lru, _ = simplelru.NewLRU[any, *fdRef](size, func(_ any, r *fdRef) {
		c.evicted.Add(1)
		r.release()
	})
	return c
}

// get returns the cached fd for key with a reference held, or nil.
func (c *fdCache) get(key any) *fdRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.lru.Get(key)
	if !ok {
		return nil
	}
	r.refs.Add(1)
	return r
}

// add caches fd under key and returns it with a reference held. If
// another goroutine cached key first, fd is closed and theirs returned.
func (c *fdCache) add(key any, fd int) *fdRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.lru.Get(key); ok {
		unix.Close(fd)
		r.refs.Add(1)
		return r
	}
	r := &fdRef{fd: fd}
	r.refs.Store(2)
	c.lru.Add(key, r)
	c.opened.Add(1)
	return r
}

// remove drops key from the cache; the fd closes once unused.
func (c *fdCache) remove(key any) {
	c.mu.Lock()
	c.lru.Remove(key)
	c.mu.Unlock()
}

// len is the number of cached fds.
func (c *fdCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

package cachefs

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Descriptors of staging files. A local handle does not hold a
// descriptor of its own: it names its node's staging file (stagedFile),
// and each read, write or other call on it borrows a descriptor from a
// bounded cache shared by every handle (stagingFDs), which opens the
// file by name again where it evicted it. A staging file keeps its name
// while a handle is open (it is dropped only once none is), so the
// reopen finds it. So the daemon's open files stay bounded however many
// files the guest holds open, as the host's fdCache bounds the server's
// (fio with 10 jobs of 10,000 files each held open failed with EMFILE
// when each handle held one). A passthrough handle's backing file is
// registered from a borrowed descriptor: the kernel keeps its own
// reference to the file.

// stagingFDMax bounds the cached descriptors of staging files.
const stagingFDMax = 256

// stagingFD is a reference-counted descriptor: the cache holds one
// reference while it is cached, each borrower one while using it, and
// the last release closes it, so that an eviction never closes a
// descriptor in use.
type stagingFD struct {
	f    *os.File // immutable
	refs atomic.Int32
}

func (r *stagingFD) release() {
	if r.refs.Add(-1) == 0 {
		r.f.Close()
	}
}

// stagingFDs caches descriptors, open for reading and writing, of
// staging files by name.
type stagingFDs struct {
	dir string // immutable: the state directory

	mu  sync.Mutex // protects lru
	lru *simplelru.LRU[string, *stagingFD]
}

func newStagingFDs(dir string, size int) *stagingFDs {
	c := &stagingFDs{dir: dir}
	c.lru, _ = simplelru.NewLRU[string, *stagingFD](size, func(_ string, r *stagingFD) { r.release() })
	return c
}

// get returns name's descriptor with a reference held, opening it if it
// is not cached.
func (c *stagingFDs) get(name string) (*stagingFD, error) {
	if r := c.peek(name); r != nil {
		return r, nil
	}
	f, err := openPlain(filepath.Join(c.dir, name), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return c.add(name, f), nil
}

// peek returns name's descriptor with a reference held if it is cached,
// else nil.
func (c *stagingFDs) peek(name string) *stagingFD {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.lru.Get(name)
	if !ok {
		return nil
	}
	r.refs.Add(1)
	return r
}

// add caches f, open on name, and returns it with a reference held; if
// another descriptor of name was cached meanwhile, f is closed and that
// one returned.
func (c *stagingFDs) add(name string, f *os.File) *stagingFD {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.lru.Get(name); ok {
		f.Close()
		r.refs.Add(1)
		return r
	}
	r := &stagingFD{f: f}
	r.refs.Store(2)
	c.lru.Add(name, r)
	return r
}

// forget drops name's descriptor, if cached; it closes once unused.
func (c *stagingFDs) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(name)
}

// purge drops every cached descriptor.
func (c *stagingFDs) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Purge()
}

// len is the number of cached descriptors.
func (c *stagingFDs) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// stagedFile is a local handle's staging file, used through a borrowed
// descriptor.
type stagedFile struct {
	fds  *stagingFDs // immutable
	name string      // immutable
}

// with runs fn on a descriptor of the file.
func (s *stagedFile) with(fn func(f *os.File) error) error {
	r, err := s.fds.get(s.name)
	if err != nil {
		return err
	}
	defer r.release()
	return fn(r.f)
}

func (s *stagedFile) ReadAt(b []byte, off int64) (n int, err error) {
	if werr := s.with(func(f *os.File) error { n, err = f.ReadAt(b, off); return nil }); werr != nil {
		return 0, werr
	}
	return n, err
}

func (s *stagedFile) WriteAt(b []byte, off int64) (n int, err error) {
	if werr := s.with(func(f *os.File) error { n, err = f.WriteAt(b, off); return nil }); werr != nil {
		return 0, werr
	}
	return n, err
}

func (s *stagedFile) Truncate(size int64) error {
	return s.with(func(f *os.File) error { return f.Truncate(size) })
}

func (s *stagedFile) Sync() error {
	return s.with(func(f *os.File) error { return f.Sync() })
}

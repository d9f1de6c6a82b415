package consistency

import (
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Registration is one registered subtree.
type Registration struct {
	ID   uint64
	Path string // clean, relative to the mount root, "" for the root
	Mode Mode
	Refs int // registrations of the same path and mode share one entry
}

// Policy maps paths to modes. A path's mode is the strongest among the
// registrations of it and its ancestors; with none, the default mode.
type Policy struct {
	def Mode // immutable

	gen atomic.Uint64 // bumped on every change; caches of ModeFor compare it

	mu   sync.Mutex // protects the following
	regs map[uint64]*Registration
	next uint64
}

// NewPolicy returns a policy whose unregistered paths have mode def.
func NewPolicy(def Mode) *Policy {
	return &Policy{def: def, regs: map[uint64]*Registration{}, next: 1}
}

// Generation changes whenever the registrations do.
func (p *Policy) Generation() uint64 { return p.gen.Load() }

// Clean turns a user path into the policy's form: relative to the
// mount root, no leading or trailing slash, "" for the root.
func Clean(p string) string {
	p = strings.Trim(path.Clean("/"+p), "/")
	return p
}

// Register adds a registration of p with mode m and returns its id. A
// second registration of the same path and mode shares the id and is
// counted.
func (p *Policy) Register(pth string, m Mode) uint64 {
	pth = Clean(pth)
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.gen.Add(1)
	for _, r := range p.regs {
		if r.Path == pth && r.Mode == m {
			r.Refs++
			return r.ID
		}
	}
	r := &Registration{ID: p.next, Path: pth, Mode: m, Refs: 1}
	p.next++
	p.regs[r.ID] = r
	return r.ID
}

// Unregister drops one reference to registration id. It reports the
// registration as it was and whether it is now gone.
func (p *Policy) Unregister(id uint64) (Registration, bool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.regs[id]
	if r == nil {
		return Registration{}, false, false
	}
	defer p.gen.Add(1)
	r.Refs--
	if r.Refs == 0 {
		delete(p.regs, id)
	}
	return *r, r.Refs == 0, true
}

// List returns the registrations, ordered by path.
func (p *Policy) List() []Registration {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Registration, 0, len(p.regs))
	for _, r := range p.regs {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Registration) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// ModeFor returns the effective mode of a clean path. Default means no
// registration covers it; it behaves as Consistent.
func (p *Policy) ModeFor(pth string) Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, found := p.def, false
	for _, r := range p.regs {
		if covers(r.Path, pth) && (!found || r.Mode.strength() > m.strength()) {
			m, found = r.Mode, true
		}
	}
	if m == Default {
		return Consistent
	}
	return m
}

// covers reports whether the subtree at root contains p.
func covers(root, p string) bool {
	return root == "" || p == root || strings.HasPrefix(p, root+"/")
}

// Get returns registration id as it is now.
func (p *Policy) Get(id uint64) (Registration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.regs[id]
	if r == nil {
		return Registration{}, false
	}
	return *r, true
}

// Default returns the mode of unregistered paths as given.
func (p *Policy) Default() Mode { return p.def }

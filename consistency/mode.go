package consistency

import (
	"fmt"
	"time"
)

// Mode is a subtree's consistency mode, after Docker's bind-mount flags.
type Mode uint8

const (
	// Default behaves as Consistent, with the lowest priority: any
	// registration overlapping it wins.
	Default Mode = iota
	// Delegated: the guest is authoritative. It may cache data, metadata
	// and structure, and complete changes locally, writing them back to
	// the host later; the guest's view wins.
	Delegated
	// Cached: the host is authoritative. The guest may serve reads,
	// attributes and directory structure from caches, which host events
	// invalidate; its own changes reach the host before they complete.
	Cached
	// Consistent: host and guest always agree. Nothing is cached and
	// every operation reaches the host.
	Consistent
)

// ParseMode parses a mode name as given on the command line.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "default", "":
		return Default, nil
	case "consistent":
		return Consistent, nil
	case "cached":
		return Cached, nil
	case "delegated":
		return Delegated, nil
	}
	return Default, fmt.Errorf("unknown consistency mode %q (want consistent, cached, delegated or default)", s)
}

func (m Mode) String() string {
	return [...]string{"default", "delegated", "cached", "consistent"}[m]
}

// strength orders modes when registrations overlap: the stronger wins.
func (m Mode) strength() int {
	return [...]int{0, 1, 2, 3}[m]
}

// MayCacheAttrs reports whether attributes may be served from the guest.
func (m Mode) MayCacheAttrs() bool { return m == Cached || m == Delegated }

// MayCacheEntries reports whether names (positive and negative) and
// directory listings may be served from the guest.
func (m Mode) MayCacheEntries() bool { return m == Cached || m == Delegated }

// MayCacheData reports whether file contents may be served from the
// guest's page cache across opens.
func (m Mode) MayCacheData() bool { return m == Cached || m == Delegated }

// WritesBack reports whether changes may complete in the guest and reach
// the host later.
func (m Mode) WritesBack() bool { return m == Delegated }

// KernelTimeout is how long the kernel may trust an entry or attribute
// of this mode without asking: zero for modes that cache nothing.
func (m Mode) KernelTimeout(revalidate time.Duration) time.Duration {
	if !m.MayCacheAttrs() {
		return 0
	}
	return revalidate
}

// Package consistency defines cachefs's consistency modes and the policy
// that assigns one to every path of the mount.
//
// # Modes
//
// A Mode says what the guest may cache, when its changes reach the host
// and whose view wins (see the constants). Code asks a mode's predicates
// (MayCacheAttrs, MayCacheEntries, MayCacheData, WritesBack) and never
// compares modes itself. Sockets, fifos and devices are never cached,
// whatever the mode: callers check the file type first.
//
// # Registrations
//
// The container runtime registers each bind-mounted subtree with its
// mode (`cachefsd ctl register`). Registrations are reference-counted:
// two containers registering the same path and mode share one. Where
// registrations overlap, the strongest mode wins (consistent > cached >
// delegated); unregistered paths get the policy's default mode, and the
// Default mode behaves as Consistent with the lowest priority.
//
// # Locking
//
// Policy.mu guards the registrations; Policy.gen is bumped on every
// change so that callers caching ModeFor results can tell they are stale
// without taking the lock.
package consistency

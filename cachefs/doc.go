// Package cachefs is the guest side of cachefs: a raw go-fuse
// filesystem that answers each kernel request from the guest's caches
// where the node's consistency mode allows, and forwards the rest to the
// host through an upstream.Client.
//
// # Connections
//
// A Guest (guest.go) is one daemon's set of kernel connections over one
// upstream session (docs/connections.md). The main connection, an FS
// mounted with Mount at the mountpoint, serves the default mode; a
// cached registration binds the subtree from the cached mode's own
// connection (MountCached: an FS whose policy caches every path, served
// through cachedConn, conn_cached.go), which answers OPEN, OPENDIR,
// FLUSH and CREATE with ENOSYS so that the guest kernel answers opens,
// closes and warm reads alone. Registrations are binds of open_tree
// clones, stacked deepest on top (guest_bind.go). The connections share
// host events, and a change through one reaches the others before it is
// answered (peers.go). Names are invalidated with FUSE_EXPIRE_ONLY so
// that the binds on them stay (notify_expire.go).
//
// # Nodes and handles
//
// The kernel knows nodes by a guest-assigned nodeid (nodes.go); each
// maps to a host node id valid in one host session (epoch). After the
// host lost a session, a node is looked up again through its parent and
// name, and open files are reopened, on first use. Host references are
// counted per node and returned with batched forgets (forget.go) once
// neither the kernel nor a cache holds the node.
//
// # Modes
//
// The consistency.Policy gives each node's subtree a mode (mode.go),
// which sets the kernel's entry and attribute timeouts and open flags
// (page cache kept across opens, directory listings cached) and whether
// the daemon's caches are used. Consistent forwards everything, with
// zero timeouts. Cached serves attributes, names (also absent ones) and
// whole listings from the metadata cache (cache.go), prefetches a
// subtree's listings in one round trip for tree walks (dircache.go),
// and opens read-only files lazily, reading them by node (readnode.go)
// until the host must hold them open, and without FLUSH at close
// (FOPEN_NOFLUSH); opens of a cached directory share one immutable
// listing (dirSnap), so an open costs no work per entry. Its own changes
// go to the host at once and drop what they invalidate. Delegated (delegated.go,
// writeback.go) completes changes in the guest and writes them back
// later from a journal; file contents live in staging files, which the
// kernel reads and writes itself (passthrough.go), which the daemon
// reaches through a bounded cache of descriptors however many are open
// (staging_fds.go) and which are reused once the host has them
// (staging.go). Sockets, fifos and devices are
// never cached.
//
// # Invalidation
//
// Host events (events.go) drop cached names and attributes and tell the
// kernel, from the client's event goroutine, never from a request
// handler or under a lock the kernel may wait on (invalidate.go). The
// actuator (actuate.go, actuator_ops.go) then raises the inotify events
// guest watchers expect by syscalls the filesystem answers itself.
// Changing the policy drops every cache (control.go).
//
// # Transport
//
// Mount serves the kernel through go-fuse over /dev/fuse, or, with
// MountOptions.URing, over FUSE over io_uring with a queue per CPU
// (internal/fuseuring), which cachefsd uses where the kernel offers it
// (--uring auto); both reach the same countingFS.
//
// # Locks
//
// POSIX locks and flock are the host's (ops_lock.go): every request
// goes to it. A blocking one that the kernel interrupts (a signal to the
// caller) is cancelled on the host, and the kernel gets the host's
// answer: EINTR once the host has stopped waiting, or success if the
// lock was granted first. So a caller told EINTR (or whose call the
// kernel restarts) never leaves a lock behind on the host (upstream's
// Blocking locks).
//
// # Counting
//
// The mount serves countingFS (kernelops.go), which counts the kernel's
// requests by opcode before handing them to FS: a request the guest
// answers alone still costs a round trip into the daemon, and those are
// what bound warm workloads.
//
// # Errors
//
// Node methods return errno: FS.status maps host Errnos as they are,
// a lost session to ESTALE and anything else to EIO (logged).
//
// A full disk shows as ENOSPC where the change is made. A full host
// fails the application's write in consistent and cached subtrees; in
// delegated ones the write-back stalls at the change the host has no
// space for, keeps it with the guest's data, reports it (ctl flush, ctl
// stats) and sends it again until it fits (writeback.go). A full state
// directory fails delegated changes before they are made (journal.go).
//
// # Host outages
//
// A kernel request's calls to the host carry a waitCtx (waitctx.go):
// they wait for the host as the client's bounds say (--host-timeout)
// and end at once when the request's caller is dying, never for a
// signal it survives. Each call names the host session its ids belong
// to (upstream.Client.CallIn), so that after a host restart it is
// repeated with ids found again by name, and a node whose name leads
// to another host inode is gone (ESTALE). docs/faults.md.
//
// # Locking
//
// Lock order: writeback.mu, then metaCache.mu, then nodeTable.mu, then
// forgetQueue.mu; handle.mu and handleTable.mu are taken alone or
// handleTable.mu before handle.mu; stagingFDs.mu is taken alone or
// after writeback.mu. No lock is held across an upstream
// call except handle.mu while (re)opening that handle, and writeback.mu
// is released before any upstream call.
package cachefs

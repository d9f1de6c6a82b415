// Package invalidation carries host changes to the guest: the host side
// watches the subtrees the guest registered and turns filesystem events
// into batches of Changes; the guest side (Actuator) raises the matching
// inotify events inside the guest.
//
// # Host watching
//
// Watcher puts an inotify watch on every directory of each watched
// subtree (directories created later are added as they appear), so only
// registered subtrees cost watches. Raw events name a directory by
// (dev, ino) and an entry by name; the server maps those to the node ids
// of a session, dropping events about directories the guest never saw:
// it caches nothing there. A queue overflow, or a watch that could not
// be added, becomes an Overflow change for the affected root: the guest
// then drops everything it caches under it, rather than miss an event.
//
// # Batching
//
// Batcher coalesces changes for a short window (identical changes are
// sent once) and hands batches to a sender that never blocks the
// connection's replies: events travel in their own frame kind and the
// guest's reader only queues them.
//
// # Guest side
//
// The guest drops cache entries and tells the kernel (entry and inode
// notifications) from a goroutine of its own, never from a request
// handler and never under a lock the kernel may wait on. The kernel
// raises no inotify event for notifications, so an Actuator thread
// performs a harmless syscall on the path through the mount (truncate to
// the current size for IN_MODIFY, chmod to the current mode for
// IN_ATTRIB, mknod/mkdir/symlink for IN_CREATE, unlink/rmdir for
// IN_DELETE, rename for IN_MOVED_*); the filesystem recognises the
// actuator's thread id in the request header and answers those requests
// itself, so nothing reaches or alters the host.
package invalidation

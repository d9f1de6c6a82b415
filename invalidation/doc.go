// Package invalidation carries host changes to the guest: the host side
// watches the subtrees the guest registered and turns filesystem events
// into batches of Changes; the guest side (Actuator) raises the matching
// inotify events inside the guest.
//
// # Host watching
//
// A Hub hands out TreeWatchers, one per consumer (a server session), all
// of one Kind, chosen once: fanotify where the process may mark a whole
// filesystem (CAP_SYS_ADMIN, and a filesystem with file handles and an
// fsid), else inotify; ServerOptions.Watcher, `cachefsd serve --watcher`
// or $CACHEFS_WATCHER force one. Both emit the same Changes: a
// directory named by (dev, ino), an entry by name, the watched root it
// is under. The server maps those to the node ids of a session,
// dropping events about directories the guest never saw: it caches
// nothing there.
//
// Watcher (inotify.go) puts an inotify watch on every directory of each
// watched subtree (directories created later are added as they appear),
// so only registered subtrees cost watches, but each one does, against
// fs.inotify.max_user_watches; each watcher has an inotify fd of its own.
// What happens in a new directory before its watch is added goes unseen
// (a guest that listed it in that window keeps a stale listing until
// its cache TTL); fanotify has no such window.
//
// The fanotify group (fanotify*.go) is one fd for the whole Hub, with no
// per-directory cost: FAN_REPORT_DFID_NAME and a FAN_MARK_FILESYSTEM
// mark on each filesystem holding a watched tree (removed with the last
// tree there). Every event of that filesystem arrives naming its
// directory by file handle; the reader resolves the handle with
// open_by_handle_at and /proc/self/fd to a path, kept in a bounded LRU
// by handle, and hands the event to each watcher with a root at or above
// that path (the deepest), counting the rest as filtered. A directory
// rename drops the cached paths under its old name and re-reads the
// paths of the roots beneath it. FAN_RENAME gives both ends of a rename
// in one event, paired by a cookie of the group's; an event on a
// directory itself (its attributes) is reported in its parent, as
// inotify's parent watch does; the kernel merges queued events of one
// name into one mask, which is reported as ops in their likely order
// (create, modify, attrib, delete; delete first if the name exists
// again). FAN_CLOSE_WRITE counts as Modify (writes through mmap) unless
// this process closed the file: the server's own closes change nothing.
// A tree on a filesystem the group cannot mark, or whose path differs
// from the one its own handle resolves to (reached through a bind
// mount), falls back to an inotify Watcher of that consumer. Paths are resolved when the event is read,
// not when it happened, so an event may be attributed by where its
// directory is now. The directories of the Hub's unwatched trees (the
// guest's state directory in `cachefsd local`) get an ignore mark
// (FAN_MARK_IGNORE, Linux 6.0) for the events of their entries, renames
// aside, so that writes there are never queued, read or filtered.
//
// On macOS the only kind is FSEvents (fsevents_*_darwin.go): each
// watcher has a stream over its roots' paths with per-file events,
// called through purego (no cgo), made again when its roots change
// (from the event id current before the old stream stopped: nothing in
// between goes unseen, an event may come twice). An event names an item
// by path; its directory is the (dev, ino) that path has when the event
// is read, its flags map to ops as a merged fanotify mask does
// (fsevents_map.go, tested on Linux), and dropped events
// (MustScanSubDirs, UserDropped, KernelDropped) or a moved root become
// an Overflow of the root. The Hub's backend (hub_linux.go,
// fsevents_darwin.go) is the platform split; the rest is shared.
//
// Nothing is dropped silently: a queue overflow (fanotify's holds 16384
// events, inotify's fs.inotify.max_queued_events), a fanotify group
// reopened after a read error, a malformed event, or a directory inotify
// could not watch becomes an Overflow change for each affected root,
// counted in Stats.Overflows; the guest then drops everything it caches
// under it.
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
//
// # Locking
//
// Each type has one mutex and takes no other lock under it. Watchers
// and the batcher call emit and send without their lock held. The
// fanotify group's mu covers its marks, roots and watchers (fanWatcher
// fields included) and is held across fanotify_mark and the readlink of
// a root's /proc link, which do not block; its path cache, cookie and
// restart time belong to the reader goroutine alone.
package invalidation

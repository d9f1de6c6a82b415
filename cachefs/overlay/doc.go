// Package overlay serves a delegated subtree as an overlayfs mount and
// writes its changes back to the host.
//
// # Layers
//
// The lower layer is a cached view of the subtree (a path the caller
// gives: today the subtree of the cachefs mount registered cached), so
// reads of what the guest has not changed come from the guest kernel's
// caches. The upper and work directories are on the guest's disk, under
// the overlay's directory (Config.Dir); the container's writes,
// creates, renames and attribute changes land there at local-disk
// speed, and an fsync there is durable when it returns. Mount's options
// (mount.go, docs/overlay.md) make a chmod, chown, utimes or rename of
// a lower file copy up its metadata only (metacopy), mark a renamed
// lower directory or file with the lower path it came from (redirect),
// and keep hard links of copied-up files (index).
//
// # Write-back
//
// An Engine owns one upper directory and a host state (state.go): a
// tree of records of what the write-back left on the host, per path,
// with the upper inode, ctime, size and mtime it was made from. A pass
// scans part of the upper directory (scan.go), compares it with the
// host state, plans path-based write-back ops (plan.go, plan_steps.go)
// in an order the host can apply one after the other, and hands them
// to a Sender in batches (send.go), which the caller wires to
// OpApply. The engine knows nothing of FUSE or nodes. The host state is
// changed as the plan is made; the records of ops the host refused are
// made unknown, so the next pass looks at them again. It is persisted
// as a snapshot and a log of each pass's changes (statefile.go),
// fsync'd, so a restarted daemon sends only what the host lacks. Every
// op is idempotent, and no pass puts anything at a path one of its
// moves leaves (such moves are parked and finished by the next pass),
// so a pass sent again after a crash ends in the same host tree.
//
// What the upper directory says and what it becomes on the host:
//
//   - a redirect xattr (trusted.overlay.redirect): a lower object moved
//     here, renamed on the host from where it is now (WBMoveOver);
//   - an upper inode recorded at another path that is gone: renamed
//     after it was written back, renamed on the host too;
//   - a whiteout (char 0/0), a record whose name is gone, an opaque
//     directory (trusted.overlay.opaque): the host's path is removed,
//     with its subtree (WBRemoveTree), before the opaque directory is
//     made anew;
//   - a metacopy file (trusted.overlay.metacopy): its data is the
//     lower's, already on the host: only attributes are sent;
//   - anything else new or changed: created (WBMkdir, WBCreate and
//     WBWrite of its data extents, WBSymlink, WBMknod, or WBLink for
//     another name of an inode the host has), then owner, mode and
//     times (WBSetattr), and xattrs other than trusted.* and
//     security.* (WBXattrs, the whole set).
//
// The upper directory is never changed while an overlay is mounted on
// it (overlayfs forbids changes to its layers): the engine only reads
// it.
//
// # Never missing a change
//
// An inotify watch on each upper directory (watch.go) marks directories
// dirty; a pass rescans the dirty ones, and the directories new or
// moved in them whole. A rename's two events are queued together and a
// pass reads the events raised while it scanned and rescans what they
// mark until none come that move anything (the others are the next
// pass's), so an object moved out of a scanned directory is always
// found where it went, and a record whose name is gone was removed. The first pass of an engine, the pass after a queue overflow
// and every Flush rescan everything. An entry is unchanged if its
// inode, ctime, size and mtime are as recorded and no IN_MODIFY names
// it; a changed file's data is sent if its size or mtime differ or an
// IN_MODIFY came, and in a pass without those hints (the first after a
// start or an overflow) if its ctime differs.
// A directory's watch loses IN_MODIFY at the first one it raises and
// gets it back when a pass scans it (quiet.go): the event costs every
// write about 1 us.
// Writes through shared mappings raise no event: before a file's data
// is read its dirty pages are written out, so a later write through a
// mapping faults and changes the mtime.
//
// # Errors
//
// A group of ops about one path fails or succeeds together. Ops the
// host refuses are Failures (path relative to the subtree, op, errno),
// reported by Flush until a pass gets them through; no space, a
// cancelled op or a lost connection make the engine pass again after a
// growing pause (at most 5 s), everything rescanned.
//
// # Goroutines and locking
//
// One goroutine per Engine (engine_run.go) owns the watcher, the host
// state and the state file; Flush and Close talk to it through a
// channel and an eventfd. Engine.mu protects only the failures and
// counters it publishes.
package overlay

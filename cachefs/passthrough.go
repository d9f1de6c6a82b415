package cachefs

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// FUSE passthrough for staging files. A file of a delegated subtree
// whose contents the guest holds (a staging copy in the state directory)
// is opened with FOPEN_PASSTHROUGH: the kernel reads, writes and maps the
// staging file itself, with no FUSE request per read or write. Only
// staging files, never host data: a file the host has goes through the
// daemon so that every mode's rules apply to it.
//
// The kernel requires the concurrent opens of one inode to agree: all
// passthrough with one backing file, or none; any other open fails with
// EIO. So writeback.plain counts, per node, the open handles that are
// not passthrough, and a staging file is passed through only while there
// are none; its backing id is registered at the first passthrough open
// and unregistered at the last release.
//
// Writes do not reach the daemon, so the staging file is the truth for
// size and modification time while passthrough handles are open
// (refreshLocked), and a handle opened for writing is written back at
// its close (FLUSH) as if written, and again at release only if the file
// changed since. Limit: a shared writable mapping outlives the
// file's release; what is written through it after the write-back of
// that release has finished does not reach the host.

// stamp is what the guest last saw of a staging file.
type stamp struct {
	size, mtime int64
}

// initPassthrough enables passthrough if the kernel offers it and the
// daemon may register backing files (CAP_SYS_ADMIN).
func (fs *FS) initPassthrough(srv *fuse.Server) {
	if fs.wb == nil || srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return
	}
	fs.wb.mu.Lock()
	fs.wb.pt = true
	fs.wb.mu.Unlock()
}

// passThroughLocked makes h, a local handle of n being opened, a
// passthrough handle if it can be, and reports the backing id for the
// reply. Needs w.mu.
func (fs *FS) passThroughLocked(h *handle) (int32, bool) {
	w, n := fs.wb, h.node
	if !w.pt || w.plain[n] > 0 {
		return 0, false
	}
	l := n.local
	if l.backing == 0 {
		srv := fs.fuseServer()
		if srv == nil {
			return 0, false
		}
		var id int32
		var errno syscall.Errno
		err := h.lf.with(func(f *os.File) error {
			id, errno = srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(f.Fd())})
			return nil
		})
		if err != nil {
			return 0, false
		}
		if errno != 0 {
			w.pt = false // not permitted (no CAP_SYS_ADMIN) or not supported
			fs.opts.Logf("cachefs: passthrough off: registering a backing file: %v", errno)
			return 0, false
		}
		l.backing = id
	}
	w.refreshLocked(n) // the baseline before the kernel writes
	l.ptOpens++
	h.pt = true
	if h.flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		h.dirty = true // its writes are not seen: assume it writes
	}
	w.stats.Passthrough++
	return l.backing, true
}

// ptReleaseLocked ends passthrough handle h. Needs w.mu.
func (fs *FS) ptReleaseLocked(h *handle) {
	l := h.node.local
	l.ptOpens--
	if l.ptOpens == 0 && l.backing != 0 {
		if srv := fs.fuseServer(); srv != nil {
			srv.UnregisterBackingFd(l.backing)
		}
		l.backing = 0
	}
}

// refreshLocked takes n's size and modification time from its staging
// file if it changed since last seen, as writes the kernel passed through
// change it. It asks a cached descriptor of the file where there is one
// (an fstat, where a stat by path walked the state directory about five
// times per untarred file). Needs w.mu.
func (w *writeback) refreshLocked(n *node) {
	l := n.local
	if l == nil || l.staging == "" {
		return
	}
	var st syscall.Stat_t
	if !w.statStagingLocked(l, nil, &st) {
		return
	}
	now := stamp{size: st.Size, mtime: st.Mtim.Nano()}
	l.attr.Blocks = uint64(st.Blocks)
	w.chargeLocked(l, st.Blocks*512)
	if !l.seenValid {
		l.seen, l.seenValid = now, true
		return
	}
	if now.size == l.seen.size && now.mtime == l.seen.mtime {
		return
	}
	l.attr.Size = uint64(now.size)
	if now.mtime != l.seen.mtime {
		l.attr.Mtime, l.attr.Ctime = now.mtime, now.mtime
	}
	l.seen = now
}

// seenLocked records that the daemon changed n's staging file itself and
// set n's attributes for it: the file as it is now is the baseline of
// the next refresh, which takes from it only what changed after (a
// passthrough writer's writes). A baseline taken later, at the next
// refresh, would hide what such a writer did meanwhile: a truncate, then
// a write past the end through the kernel, kept the truncated size. f is
// the file as the handle that changed it has it, or nil. Needs w.mu.
func (w *writeback) seenLocked(n *node, f *stagedFile) {
	l := n.local
	var st syscall.Stat_t
	if !w.statStagingLocked(l, f, &st) {
		l.seenValid = false
		return
	}
	l.seen, l.seenValid = stamp{size: st.Size, mtime: st.Mtim.Nano()}, true
	l.attr.Blocks = uint64(st.Blocks)
	w.chargeLocked(l, st.Blocks*512)
}

// statStagingLocked stats l's staging file through f, else a cached
// descriptor of it, else by path. Needs w.mu.
func (w *writeback) statStagingLocked(l *local, f *stagedFile, st *syscall.Stat_t) bool {
	if f != nil {
		return f.with(func(of *os.File) error { return syscall.Fstat(int(of.Fd()), st) }) == nil
	}
	if r := w.fds.peek(l.staging); r != nil {
		defer r.release()
		return syscall.Fstat(int(r.f.Fd()), st) == nil
	}
	return syscall.Stat(filepath.Join(w.dir, l.staging), st) == nil
}

// chargeLocked counts bytes, what l's staging file has allocated, in
// the staged bytes the write-back limits: allocated, not the size, so
// that holes do not count. Needs w.mu.
func (w *writeback) chargeLocked(l *local, bytes int64) {
	w.staged += bytes - l.charged
	l.charged = bytes
}

// plainOpenLocked counts an open handle of n that is not passthrough.
// Needs w.mu.
func (w *writeback) plainOpenLocked(n *node) {
	w.plain[n]++
}

// plainCloseLocked uncounts it. Needs w.mu.
func (w *writeback) plainCloseLocked(n *node) {
	if w.plain[n]--; w.plain[n] <= 0 {
		delete(w.plain, n)
	}
}

// countPlain counts an open of n that is not passthrough, before it is
// made, so that n is not passed through while it is open; the handle
// made then owns the count (handle.plain). Without write-back there is
// no passthrough and nothing to count.
func (fs *FS) countPlain(n *node) {
	if fs.wb == nil {
		return
	}
	fs.wb.mu.Lock()
	defer fs.wb.mu.Unlock()
	fs.wb.plainOpenLocked(n)
}

// uncountPlain undoes countPlain for an open that failed.
func (fs *FS) uncountPlain(n *node) {
	if fs.wb == nil {
		return
	}
	fs.wb.mu.Lock()
	defer fs.wb.mu.Unlock()
	fs.wb.plainCloseLocked(n)
}

// releasePlain drops the count a released handle owns, if any.
func (fs *FS) releasePlain(h *handle) {
	if fs.wb == nil {
		return
	}
	fs.wb.mu.Lock()
	defer fs.wb.mu.Unlock()
	if h.plain {
		h.plain = false
		fs.wb.plainCloseLocked(h.node)
	}
}

//go:build linux

package invalidation

import (
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Event dispatch, on the group's reader goroutine. A directory handle is
// resolved to its current path (open_by_handle_at, then /proc) and the
// result cached by handle; a directory rename drops the cached paths
// under the old name and re-reads the paths of roots beneath it, and an
// overflow or restart drops them all. A removed directory's entry ages
// out: its handle carries the inode's generation and never names
// another directory. Events reach the watchers with a root above the
// directory; the others are counted as filtered.

// fanMatch is a watcher that wants an event, and its root above it.
type fanMatch struct {
	w    *fanWatcher
	root dirID
}

const fanEntryOps = unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_MODIFY | unix.FAN_CLOSE_WRITE | unix.FAN_ATTRIB

// parse handles a buffer of events. A malformed event overflows every
// root rather than be lost.
func (g *fanGroup) parse(b []byte) {
	for len(b) > 0 {
		ev, rest, err := nextFanEvent(b)
		if ev.fd >= 0 && err == nil {
			unix.Close(int(ev.fd)) // never with fid reporting, but not leaked either
		}
		g.c.events.Add(1)
		if err != nil {
			g.forget()
			g.overflowAll()
		} else {
			g.event(&ev)
		}
		b = rest
	}
}

func (g *fanGroup) event(ev *fanEvent) {
	switch {
	case ev.mask&unix.FAN_Q_OVERFLOW != 0:
		g.forget()
		g.overflowAll()
	case ev.mask&unix.FAN_RENAME != 0:
		g.rename(ev)
	default:
		if ev.pid == g.pid {
			ev.mask &^= unix.FAN_CLOSE_WRITE // the server's own closes change nothing
		}
		g.entry(ev)
	}
}

// entry handles an event on a name in a directory, or on a directory
// itself (name "."), which is reported in its parent as inotify does.
func (g *fanGroup) entry(ev *fanEvent) {
	if ev.mask&fanEntryOps == 0 {
		return
	}
	d, ok := g.resolve(&ev.dir)
	if !ok {
		g.c.filtered.Add(1)
		return
	}
	if ev.mask&(unix.FAN_CREATE|unix.FAN_ONDIR) == unix.FAN_CREATE|unix.FAN_ONDIR && ev.dir.name != "." {
		g.unwatchedDir(d.path + "/" + ev.dir.name)
	}
	c := Change{DirDev: d.id.dev, DirIno: d.id.ino, Name: ev.dir.name, IsDir: ev.mask&unix.FAN_ONDIR != 0}
	if c.Name == "." || c.Name == "" {
		parent, ok := g.parentOf(&ev.dir)
		if !ok {
			g.c.filtered.Add(1)
			return
		}
		c.DirDev, c.DirIno, c.Name, c.IsDir = parent.dev, parent.ino, path.Base(d.path), true
	}
	ops := opsOf(ev.mask, func() bool {
		var st unix.Stat_t
		return unix.Lstat(d.path+"/"+c.Name, &st) == nil
	})
	ms := g.match(d.path)
	if len(ms) == 0 {
		g.c.filtered.Add(1)
	}
	g.emit(ms, c, ops...)
}

// rename handles FAN_RENAME: a MoveFrom for the watchers of the old
// directory and a MoveTo for those of the new one, with one cookie.
func (g *fanGroup) rename(ev *fanEvent) {
	from, okFrom := g.resolve(&ev.old)
	to, okTo := g.resolve(&ev.new)
	var mFrom, mTo []fanMatch
	if okFrom {
		mFrom = g.match(from.path)
	}
	if okTo {
		mTo = g.match(to.path)
	}
	if ev.mask&unix.FAN_ONDIR != 0 {
		if okFrom {
			g.moved(from.path + "/" + ev.old.name)
		} else {
			g.forget()
		}
		if okTo {
			g.unwatchedDir(to.path + "/" + ev.new.name)
		}
	}
	if len(mFrom)+len(mTo) == 0 {
		g.c.filtered.Add(1)
		return
	}
	if g.cookie++; g.cookie == 0 {
		g.cookie++
	}
	isDir := ev.mask&unix.FAN_ONDIR != 0
	g.emit(mFrom, Change{DirDev: from.id.dev, DirIno: from.id.ino, Name: ev.old.name, IsDir: isDir, Cookie: g.cookie}, MoveFrom)
	g.emit(mTo, Change{DirDev: to.id.dev, DirIno: to.id.ino, Name: ev.new.name, IsDir: isDir, Cookie: g.cookie}, MoveTo)
}

// emit sends c with each op to each match, under the match's root.
func (g *fanGroup) emit(ms []fanMatch, c Change, ops ...Op) {
	for _, m := range ms {
		c.RootDev, c.RootIno = m.root.dev, m.root.ino
		for _, op := range ops {
			c.Op = op
			m.w.emit(c)
		}
	}
}

// match returns the watchers with a root at or above p, each with its
// deepest such root.
func (g *fanGroup) match(p string) []fanMatch {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []fanMatch
	for w := range g.watchers {
		best := -1
		var m fanMatch
		for id := range w.roots {
			if r := g.roots[id]; r != nil && within(p, r.path) && len(r.path) > best {
				best, m = len(r.path), fanMatch{w, id}
			}
		}
		if best >= 0 {
			out = append(out, m)
		}
	}
	return out
}

// within reports whether path p is dir or beneath it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir) && (dir == "/" || p[len(dir)] == '/')
}

// overflowAll overflows every root of every watcher.
func (g *fanGroup) overflowAll() {
	g.mu.Lock()
	var ms []fanMatch
	for w := range g.watchers {
		for id := range w.roots {
			ms = append(ms, fanMatch{w, id})
		}
	}
	g.mu.Unlock()
	for _, m := range ms {
		g.c.overflows.Add(1)
		id := m.root
		m.w.emit(Change{Op: Overflow, DirDev: id.dev, DirIno: id.ino, RootDev: id.dev, RootIno: id.ino})
	}
}

// resolve returns the directory f names, from the cache or else by
// opening its handle. A directory gone, or unlinked, does not resolve.
func (g *fanGroup) resolve(f *fanFID) (fanDir, bool) {
	if f.key == "" {
		return fanDir{}, false
	}
	if d, ok := g.dirs.Get(f.key); ok {
		return d, true
	}
	fd, err := g.openFID(f)
	if err != nil {
		return fanDir{}, false
	}
	defer unix.Close(fd)
	p, err := readProcLink(fd)
	var st unix.Stat_t
	if err != nil || strings.HasSuffix(p, " (deleted)") || unix.Fstat(fd, &st) != nil {
		return fanDir{}, false
	}
	d := fanDir{path: p, id: dirID{st.Dev, st.Ino}}
	g.c.resolved.Add(1)
	g.dirs.Add(f.key, d)
	return d, true
}

// parentOf returns the parent of the directory f names.
func (g *fanGroup) parentOf(f *fanFID) (dirID, bool) {
	fd, err := g.openFID(f)
	if err != nil {
		return dirID{}, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstatat(fd, "..", &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return dirID{}, false
	}
	return dirID{st.Dev, st.Ino}, true
}

// openFID opens an O_PATH fd of the directory f names. Mount fds are
// closed only after the reader has returned.
func (g *fanGroup) openFID(f *fanFID) (int, error) {
	g.mu.Lock()
	mfd, ok := g.mounts[f.fsid]
	g.mu.Unlock()
	if !ok {
		return -1, unix.ESTALE
	}
	return unix.OpenByHandleAt(mfd, unix.NewFileHandle(f.htype, f.handle), unix.O_PATH|unix.O_CLOEXEC)
}

// moved drops what is cached under a directory that moved from p.
func (g *fanGroup) moved(p string) {
	for _, k := range g.dirs.Keys() {
		if d, ok := g.dirs.Peek(k); ok && within(d.path, p) {
			g.dirs.Remove(k)
		}
	}
	g.refreshRoots(p)
}

// forget drops every cached path: renames may have gone unseen.
func (g *fanGroup) forget() {
	g.dirs.Purge()
	g.refreshRoots("/")
}

// refreshRoots re-reads the paths of the roots at or beneath p.
func (g *fanGroup) refreshRoots(p string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.roots {
		if within(r.path, p) {
			if np, err := readProcLink(r.fd); err == nil {
				r.path = np
			}
		}
	}
}

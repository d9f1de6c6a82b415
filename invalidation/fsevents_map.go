package invalidation

import (
	"path"
	"strings"
)

// FSEvents event flags (FSEvents.h, kFSEventStreamEventFlag*): the
// mapping from them to Changes is shared so that it is tested on Linux.
const (
	fsMustScanSubDirs  = 0x00000001
	fsUserDropped      = 0x00000002
	fsKernelDropped    = 0x00000004
	fsHistoryDone      = 0x00000010
	fsRootChanged      = 0x00000020
	fsItemCreated      = 0x00000100
	fsItemRemoved      = 0x00000200
	fsItemInodeMetaMod = 0x00000400
	fsItemRenamed      = 0x00000800
	fsItemModified     = 0x00001000
	fsItemFinderInfo   = 0x00002000
	fsItemChangeOwner  = 0x00004000
	fsItemXattrMod     = 0x00008000
	fsItemIsDir        = 0x00020000

	// fsLost is what makes an event an Overflow of its root: the kernel
	// or the stream dropped events, or the root itself moved.
	fsLost = fsMustScanSubDirs | fsUserDropped | fsKernelDropped | fsRootChanged
	// fsAttrib are the attribute changes.
	fsAttrib = fsItemInodeMetaMod | fsItemFinderInfo | fsItemChangeOwner | fsItemXattrMod
)

// fsEvent is one FSEvents record: an item's path and the flags that
// accumulated for it, and whether the path exists when it is read.
type fsEvent struct {
	path   string
	flags  uint32
	exists bool
}

// fsOps returns the ops of an event's flags in their likely order, as
// opsOf does for a merged fanotify mask: create, modify, attrib, delete,
// with delete first if the item exists again. A rename is MoveTo if the
// path exists now, else MoveFrom.
func fsOps(flags uint32, exists bool) []Op {
	var ops []Op
	if flags&fsItemRemoved != 0 && exists {
		ops = append(ops, Delete)
	}
	if flags&fsItemCreated != 0 {
		ops = append(ops, Create)
	}
	if flags&fsItemModified != 0 {
		ops = append(ops, Modify)
	}
	if flags&fsAttrib != 0 {
		ops = append(ops, Attrib)
	}
	if flags&fsItemRenamed != 0 {
		ops = append(ops, map[bool]Op{true: MoveTo, false: MoveFrom}[exists])
	}
	if flags&fsItemRemoved != 0 && !exists {
		ops = append(ops, Delete)
	}
	return ops
}

// fsRootOf returns the deepest of roots (by path) that p is at or
// beneath, and whether there is one.
func fsRootOf(p string, roots map[string]dirID) (string, dirID, bool) {
	best, found := "", false
	for rp := range roots {
		if (p == rp || strings.HasPrefix(p, strings.TrimSuffix(rp, "/")+"/")) && len(rp) >= len(best) {
			best, found = rp, true
		}
	}
	return best, roots[best], found
}

// fsChanges maps one event to Changes. dirOf gives the (dev, ino) of a
// directory path, false if it is gone. An event on a root itself
// (its attributes) is not reported: the guest hears of the root's
// entry through its parent's tree, if watched. cookie numbers renames.
func fsChanges(ev fsEvent, roots map[string]dirID, dirOf func(string) (dirID, bool), cookie *uint32) []Change {
	rp, root, ok := fsRootOf(ev.path, roots)
	if !ok || ev.flags&fsHistoryDone != 0 { // the end of a replay, no change
		return nil
	}
	if ev.flags&fsLost != 0 {
		return []Change{{Op: Overflow, RootDev: root.dev, RootIno: root.ino}}
	}
	if ev.path == rp {
		return nil
	}
	dir, ok := dirOf(path.Dir(ev.path))
	if !ok {
		return nil // its directory is gone: that directory's own event says so
	}
	var cs []Change
	for _, op := range fsOps(ev.flags, ev.exists) {
		c := Change{Op: op, DirDev: dir.dev, DirIno: dir.ino, Name: path.Base(ev.path),
			IsDir: ev.flags&fsItemIsDir != 0, RootDev: root.dev, RootIno: root.ino}
		if op == MoveFrom || op == MoveTo {
			*cookie++
			c.Cookie = *cookie
		}
		cs = append(cs, c)
	}
	return cs
}

package cachefs

// Hard links in delegated subtrees. The node table records one name per
// node (where), the last it was seen under; write-back finds a node's
// path through it. A file with several names must keep a recorded name
// that still exists: a rename of another of its names does not move the
// recorded one, and the removal of the recorded one must record another.

// place records name in parent as where n is.
func (t *nodeTable) place(n, parent *node, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setWhereLocked(n, parent, name)
}

// nameInOwned returns a name of n in a directory whose listing the guest
// owns, if any. Needs writeback.mu (for the listings).
func (t *nodeTable) nameInOwned(n *node, first *node) (*node, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if name, ok := childName(first, n); ok {
		return first, name, true
	}
	for _, d := range t.byID {
		if name, ok := childName(d, n); ok {
			return d, name, true
		}
	}
	return nil, "", false
}

// childName returns a name of n in the owned directory d.
func childName(d, n *node) (string, bool) {
	if d == nil || d.local == nil {
		return "", false
	}
	for name, c := range d.local.children {
		if c == n {
			return name, true
		}
	}
	return "", false
}

// movedLocked records that n, a name of which moved to newName in
// newParent, is there: the name the table had for n may be another of
// its links. Needs w.mu.
func (fs *FS) movedLocked(n, newParent *node, newName string) {
	if p, name := fs.nodes.where(n); p != newParent || name != newName {
		fs.nodes.place(n, newParent, newName)
	}
}

// unlinkedLocked records another name of n, a file that had a name in
// dir removed, if that was its recorded one and it has others. Needs
// w.mu.
func (fs *FS) unlinkedLocked(n, dir *node) {
	if n.local == nil || n.local.attr.Nlink == 0 || n.mode == sIFDIR {
		return
	}
	if p, _ := fs.nodes.where(n); p != nil {
		return
	}
	if d, name, ok := fs.nodes.nameInOwned(n, dir); ok {
		fs.nodes.place(n, d, name)
	}
}

package main

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Rmdir and Rename, so that a build that replaces its output directory
// (a second `ember build` removes the first's dist/) runs on the floor.

// Rmdir removes an empty directory.
func (fs *floorFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("rmdir")
	dir := fs.nodes[h.NodeId]
	id, ok := dir.kids[name]
	switch n := fs.nodes[id]; {
	case !ok:
		return fuse.ENOENT
	case n.kids == nil:
		return fuse.Status(syscall.ENOTDIR)
	case len(n.kids) > 0:
		return fuse.Status(syscall.ENOTEMPTY)
	}
	delete(dir.kids, name)
	return fuse.OK
}

// Rename moves a name, replacing what is at the new name unless that is
// a directory that is not empty (RENAME_NOREPLACE and RENAME_EXCHANGE are
// refused).
func (fs *floorFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("rename")
	if in.Flags != 0 {
		return fuse.Status(syscall.EINVAL)
	}
	from, to := fs.nodes[in.NodeId], fs.nodes[in.Newdir]
	if from == nil || to == nil || to.kids == nil {
		return fuse.ENOENT
	}
	id, ok := from.kids[oldName]
	if !ok {
		return fuse.ENOENT
	}
	if old, ok := to.kids[newName]; ok && old != id {
		if n := fs.nodes[old]; n.kids != nil && len(n.kids) > 0 {
			return fuse.Status(syscall.ENOTEMPTY)
		}
	}
	delete(from.kids, oldName)
	to.kids[newName] = id
	return fuse.OK
}

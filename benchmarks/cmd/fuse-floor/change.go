package main

import (
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Rmdir, Rename and Write, so that a build that replaces its output (a
// second `ember build` rewrites and removes the first's dist/) runs on
// the floor, also with -noopen, where the kernel opens alone and writes
// to a file it did not create in the same open come as WRITE.

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

// Write writes to a created file's backing file by its path; a seeded
// file is read-only.
func (fs *floorFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("write")
	n := fs.nodes[in.NodeId]
	if n == nil || n.path == "" || n.seeded {
		return 0, fuse.Status(syscall.EROFS)
	}
	f, err := os.OpenFile(n.path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return 0, fuse.ToStatus(err)
	}
	defer f.Close()
	k, err := f.WriteAt(data, int64(in.Offset))
	if end := in.Offset + uint64(k); end > n.attr.Size {
		n.attr.Size = end
	}
	return uint32(k), fuse.ToStatus(err)
}

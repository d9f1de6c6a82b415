package main

import (
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// floorFS keeps a tree in memory and answers every request from it.
type floorFS struct {
	fuse.RawFileSystem
	scratch string       // immutable
	shared  bool         // immutable
	srv     *fuse.Server // set once after mount

	mu     sync.Mutex // protects the following
	nodes  map[uint64]*fnode
	next   uint64
	counts map[string]uint64
	files  int
}

// fnode is one file, directory or symlink.
type fnode struct {
	attr    fuse.Attr
	kids    map[string]uint64 // directories
	target  string            // symlinks
	path    string            // regular files: the backing file
	seeded  bool              // path is a host file of -seed, read-only
	fd      int               // its descriptor while opens > 0, or -1
	backing int32             // registered backing id while opens > 0
	opens   int
	lookups uint64
}

const forever = 3600 // seconds: entries and attributes never expire

func newFloorFS(scratch string, shared bool) *floorFS {
	fs := &floorFS{RawFileSystem: fuse.NewDefaultRawFileSystem(), scratch: scratch, shared: shared,
		nodes: map[uint64]*fnode{}, next: 2, counts: map[string]uint64{}}
	now := uint64(time.Now().Unix())
	fs.nodes[1] = &fnode{attr: fuse.Attr{Ino: 1, Mode: syscall.S_IFDIR | 0o755, Nlink: 2,
		Mtime: now, Ctime: now, Atime: now}, kids: map[string]uint64{}, fd: -1}
	return fs
}

func (fs *floorFS) countLocked(op string) { fs.counts[op]++ }

func (fs *floorFS) entryLocked(id uint64, n *fnode, out *fuse.EntryOut) {
	n.lookups++
	out.NodeId, out.Generation = id, 1
	out.Attr = n.attr
	out.SetEntryTimeout(forever * time.Second)
	out.SetAttrTimeout(forever * time.Second)
}

func (fs *floorFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("lookup")
	dir := fs.nodes[h.NodeId]
	if dir == nil || dir.kids == nil {
		return fuse.ENOENT
	}
	id, ok := dir.kids[name]
	if !ok { // a negative entry: node 0 with a timeout (an ENOENT reply would not be cached)
		*out = fuse.EntryOut{}
		out.SetEntryTimeout(forever * time.Second)
		return fuse.OK
	}
	fs.entryLocked(id, fs.nodes[id], out)
	return fuse.OK
}

func (fs *floorFS) Forget(nodeid, nlookup uint64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("forget")
}

func (fs *floorFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("getattr")
	n := fs.nodes[in.NodeId]
	if n == nil {
		return fuse.ENOENT
	}
	fs.refreshLocked(n)
	out.Attr = n.attr
	out.SetTimeout(forever * time.Second)
	return fuse.OK
}

// refreshLocked takes the size of a passed-through file from its
// backing file.
func (fs *floorFS) refreshLocked(n *fnode) {
	if n.fd < 0 || fs.shared {
		return
	}
	var st syscall.Stat_t
	if syscall.Fstat(n.fd, &st) == nil {
		n.attr.Size, n.attr.Blocks = uint64(st.Size), uint64(st.Blocks)
	}
}

func (fs *floorFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("setattr")
	n := fs.nodes[in.NodeId]
	if n == nil {
		return fuse.ENOENT
	}
	a := &n.attr
	if m, ok := in.GetMode(); ok {
		a.Mode = a.Mode&syscall.S_IFMT | m&0o7777
	}
	if u, ok := in.GetUID(); ok {
		a.Uid = u
	}
	if g, ok := in.GetGID(); ok {
		a.Gid = g
	}
	if s, ok := in.GetSize(); ok {
		a.Size = s
		if n.fd >= 0 && !fs.shared {
			syscall.Ftruncate(n.fd, int64(s))
		} else if n.path != "" && !n.seeded && !fs.shared {
			syscall.Truncate(n.path, int64(s)) // -noopen: no descriptor
		}
	}
	if t, ok := in.GetMTime(); ok {
		a.Mtime, a.Mtimensec = uint64(t.Unix()), uint32(t.Nanosecond())
	}
	if t, ok := in.GetATime(); ok {
		a.Atime, a.Atimensec = uint64(t.Unix()), uint32(t.Nanosecond())
	}
	fs.refreshLocked(n) // the reply's size replaces the kernel's: a utimes after passthrough writes
	out.Attr = *a
	out.SetTimeout(forever * time.Second)
	return fuse.OK
}

func (fs *floorFS) addLocked(h *fuse.InHeader, name string, mode uint32, out *fuse.EntryOut) (*fnode, fuse.Status) {
	dir := fs.nodes[h.NodeId]
	if dir == nil || dir.kids == nil {
		return nil, fuse.ENOENT
	}
	if _, ok := dir.kids[name]; ok {
		return nil, fuse.Status(syscall.EEXIST)
	}
	id := fs.next
	fs.next++
	now := uint64(time.Now().Unix())
	n := &fnode{attr: fuse.Attr{Ino: id, Mode: mode, Nlink: 1, Owner: fuse.Owner{Uid: h.Uid, Gid: h.Gid},
		Mtime: now, Ctime: now, Atime: now, Blksize: 4096}, fd: -1}
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		n.kids, n.attr.Nlink = map[string]uint64{}, 2
	}
	fs.nodes[id] = n
	dir.kids[name] = id
	fs.entryLocked(id, n, out)
	return n, fuse.OK
}

func (fs *floorFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("mkdir")
	_, st := fs.addLocked(&in.InHeader, name, syscall.S_IFDIR|in.Mode&^in.Umask&0o7777, out)
	return st
}

func (fs *floorFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("symlink")
	n, st := fs.addLocked(h, name, syscall.S_IFLNK|0o777, out)
	if st == fuse.OK {
		n.target, n.attr.Size = target, uint64(len(target))
		out.Attr = n.attr
	}
	return st
}

func (fs *floorFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("readlink")
	return []byte(fs.nodes[h.NodeId].target), fuse.OK
}

func (fs *floorFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("unlink")
	dir := fs.nodes[h.NodeId]
	if _, ok := dir.kids[name]; !ok {
		return fuse.ENOENT
	}
	delete(dir.kids, name)
	return fuse.OK
}

func (fs *floorFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("create")
	n, st := fs.addLocked(&in.InHeader, name, syscall.S_IFREG|in.Mode&^in.Umask&0o7777, &out.EntryOut)
	if st != fuse.OK {
		return st
	}
	if fs.shared {
		n.path = filepath.Join(fs.scratch, "shared")
	} else {
		fs.files++
		n.path = filepath.Join(fs.scratch, fmt.Sprint(fs.files))
	}
	return fs.openLocked(n, &out.OpenOut)
}

// openLocked opens n's backing file at its first open and passes the
// open through to it.
func (fs *floorFS) openLocked(n *fnode, out *fuse.OpenOut) fuse.Status {
	if n.opens == 0 {
		flags := syscall.O_RDWR | syscall.O_CREAT
		if n.seeded {
			flags = syscall.O_RDONLY
		}
		fd, err := syscall.Open(n.path, flags|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return fuse.ToStatus(err)
		}
		id, errno := fs.srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fd)})
		if errno != 0 {
			syscall.Close(fd)
			return fuse.Status(errno)
		}
		n.fd, n.backing = fd, id
	}
	n.opens++
	out.Fh = n.attr.Ino
	out.OpenFlags |= fuse.FOPEN_PASSTHROUGH
	out.BackingID = n.backing
	return fuse.OK
}

func (fs *floorFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("open")
	n := fs.nodes[in.NodeId]
	if n == nil || n.path == "" {
		return fuse.EINVAL
	}
	return fs.openLocked(n, out)
}

func (fs *floorFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("release")
	n := fs.nodes[in.Fh]
	if n == nil {
		return
	}
	if n.opens--; n.opens == 0 && n.backing != 0 {
		fs.srv.UnregisterBackingFd(n.backing)
		syscall.Close(n.fd)
		n.fd, n.backing = -1, 0
	}
}

func (fs *floorFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("flush")
	return fuse.OK
}

func (fs *floorFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("getxattr")
	return 0, fuse.ENOATTR
}

func (fs *floorFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("opendir")
	return fuse.OK
}

func (fs *floorFS) ReleaseDir(in *fuse.ReleaseIn) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("releasedir")
}

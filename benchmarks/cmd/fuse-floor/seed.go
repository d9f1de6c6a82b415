package main

import (
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The read floor: with -seed the mount starts with a copy of a host
// tree's names and attributes in memory, and reads come from the host
// files, read-only. It is the least a FUSE file system can be that
// serves a cached tree: what a warm `go list` or `ls -l` costs on it is
// what it costs on any go-fuse file system with the same kernel
// settings. -noopen answers OPEN, OPENDIR and FLUSH ENOSYS (the kernel
// then opens and lists alone, as on cachefs's cached connection);
// -noxattr answers the xattr requests ENOSYS (cachefs's
// --cached-xattrs=false).

// seed adds the tree under dir to the root. Not safe for use once
// mounted.
func (fs *floorFS) seed(dir string) error {
	ids := map[string]uint64{".": 1}
	return filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		id := fs.next
		fs.next++
		n := &fnode{attr: fuse.Attr{Ino: id, Size: uint64(st.Size), Blocks: uint64(st.Blocks),
			Atime: uint64(st.Atim.Sec), Mtime: uint64(st.Mtim.Sec), Ctime: uint64(st.Ctim.Sec),
			Atimensec: uint32(st.Atim.Nsec), Mtimensec: uint32(st.Mtim.Nsec), Ctimensec: uint32(st.Ctim.Nsec),
			Mode: st.Mode, Nlink: uint32(st.Nlink), Owner: fuse.Owner{Uid: st.Uid, Gid: st.Gid},
			Blksize: 4096}, fd: -1}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			n.kids = map[string]uint64{}
			ids[rel] = id
		case syscall.S_IFLNK:
			if n.target, err = os.Readlink(p); err != nil {
				return err
			}
		case syscall.S_IFREG:
			n.path, n.seeded = p, true
		}
		fs.nodes[id] = n
		fs.nodes[ids[filepath.Dir(rel)]].kids[d.Name()] = id
		return nil
	})
}

func (fs *floorFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	fs.mu.Lock()
	fs.countLocked("read")
	n := fs.nodes[in.NodeId]
	fs.mu.Unlock()
	if n == nil || n.path == "" {
		return nil, fuse.EINVAL
	}
	f, err := os.Open(n.path)
	if err != nil {
		return nil, fuse.ToStatus(err)
	}
	defer f.Close()
	k, err := f.ReadAt(buf, int64(in.Offset))
	if err != nil && err != io.EOF {
		return nil, fuse.ToStatus(err)
	}
	return fuse.ReadResultData(buf[:k]), fuse.OK
}

func (fs *floorFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.list(in, out, false)
}

func (fs *floorFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.list(in, out, true)
}

// list answers a listing from offset in.Offset, with entries if plus.
func (fs *floorFS) list(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked(map[bool]string{false: "readdir", true: "readdirplus"}[plus])
	dir := fs.nodes[in.NodeId]
	if dir == nil || dir.kids == nil {
		return fuse.ENOTDIR
	}
	names := make([]string, 0, len(dir.kids))
	for name := range dir.kids {
		names = append(names, name)
	}
	slices.Sort(names)
	for i := int(in.Offset); i < len(names); i++ {
		id := dir.kids[names[i]]
		n := fs.nodes[id]
		e := fuse.DirEntry{Name: names[i], Mode: n.attr.Mode, Ino: n.attr.Ino, Off: uint64(i + 1)}
		if !plus {
			if !out.AddDirEntry(e) {
				break
			}
			continue
		}
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			break
		}
		fs.entryLocked(id, n, eo)
	}
	return fuse.OK
}

func (fs *floorFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked("listxattr")
	return 0, fuse.OK
}

// noOpenFS answers OPEN, OPENDIR and FLUSH ENOSYS, once.
type noOpenFS struct{ *floorFS }

func (f noOpenFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.count("open")
	return fuse.ENOSYS
}

func (f noOpenFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.count("opendir")
	return fuse.ENOSYS
}

func (f noOpenFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	f.count("flush")
	return fuse.ENOSYS
}

// noXattrFS answers the xattr requests ENOSYS, once.
type noXattrFS struct{ fuse.RawFileSystem }

func (f noXattrFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	f.RawFileSystem.GetXAttr(cancel, h, attr, dest) // counts it
	return 0, fuse.ENOSYS
}

func (f noXattrFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	f.RawFileSystem.ListXAttr(cancel, h, dest)
	return 0, fuse.ENOSYS
}

func (fs *floorFS) count(op string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.countLocked(op)
}

package cachefs

import (
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The kernel's requests are counted by opcode (FORGET: nodes
// forgotten, batched or not). Requests the guest answers without the
// host still cost a round trip into the daemon each; ctl stats and the
// benchmarks show them beside the upstream messages. countingFS has one
// method per request type of go-fuse's RawFileSystem (WRITE is counted
// in Write, which go-fuse calls when Writev is not implemented).

// kernelOpNames are the counted opcodes, indexed by kop.
var kernelOpNames = [...]string{
	"LOOKUP",
	"GETATTR",
	"SETATTR",
	"MKNOD",
	"MKDIR",
	"UNLINK",
	"RMDIR",
	"RENAME",
	"LINK",
	"SYMLINK",
	"READLINK",
	"ACCESS",
	"GETXATTR",
	"LISTXATTR",
	"SETXATTR",
	"REMOVEXATTR",
	"CREATE",
	"TMPFILE",
	"OPEN",
	"READ",
	"LSEEK",
	"GETLK",
	"SETLK",
	"SETLKW",
	"RELEASE",
	"WRITE",
	"COPY_FILE_RANGE",
	"FLUSH",
	"FSYNC",
	"FALLOCATE",
	"OPENDIR",
	"READDIR",
	"READDIRPLUS",
	"RELEASEDIR",
	"FSYNCDIR",
	"STATFS",
	"STATX",
	"FORGET",
}

type kop int

const (
	kLookup kop = iota
	kGetAttr
	kSetAttr
	kMknod
	kMkdir
	kUnlink
	kRmdir
	kRename
	kLink
	kSymlink
	kReadlink
	kAccess
	kGetXAttr
	kListXAttr
	kSetXAttr
	kRemoveXAttr
	kCreate
	kTmpfile
	kOpen
	kRead
	kLseek
	kGetLk
	kSetLk
	kSetLkw
	kRelease
	kWrite
	kCopyFileRange
	kFlush
	kFsync
	kFallocate
	kOpenDir
	kReadDir
	kReadDirPlus
	kReleaseDir
	kFsyncDir
	kStatFs
	kStatx
	kForget
	numKernelOps
)

// kernelCounts are the requests of each opcode so far.
type kernelCounts [numKernelOps]atomic.Uint64

// KernelOp is one opcode's count.
type KernelOp struct {
	Op    string
	Count uint64
}

// snapshot lists the opcodes seen, in kernelOpNames order.
func (c *kernelCounts) snapshot() []KernelOp {
	var ops []KernelOp
	for i := range c {
		if n := c[i].Load(); n > 0 {
			ops = append(ops, KernelOp{Op: kernelOpNames[i], Count: n})
		}
	}
	return ops
}

// countingFS is what a kernel connection serves: the connection's file
// system, counting its requests in k.
type countingFS struct {
	fuse.RawFileSystem
	k *kernelCounts
}

func (c countingFS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	c.k[kLookup].Add(1)
	return c.RawFileSystem.Lookup(cancel, header, name, out)
}

func (c countingFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.k[kGetAttr].Add(1)
	return c.RawFileSystem.GetAttr(cancel, in, out)
}

func (c countingFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.k[kSetAttr].Add(1)
	return c.RawFileSystem.SetAttr(cancel, in, out)
}

func (c countingFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	c.k[kMknod].Add(1)
	return c.RawFileSystem.Mknod(cancel, in, name, out)
}

func (c countingFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	c.k[kMkdir].Add(1)
	return c.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (c countingFS) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	c.k[kUnlink].Add(1)
	return c.RawFileSystem.Unlink(cancel, header, name)
}

func (c countingFS) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	c.k[kRmdir].Add(1)
	return c.RawFileSystem.Rmdir(cancel, header, name)
}

func (c countingFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	c.k[kRename].Add(1)
	return c.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (c countingFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	c.k[kLink].Add(1)
	return c.RawFileSystem.Link(cancel, in, name, out)
}

func (c countingFS) Symlink(cancel <-chan struct{}, header *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	c.k[kSymlink].Add(1)
	return c.RawFileSystem.Symlink(cancel, header, target, name, out)
}

func (c countingFS) Readlink(cancel <-chan struct{}, header *fuse.InHeader) ([]byte, fuse.Status) {
	c.k[kReadlink].Add(1)
	return c.RawFileSystem.Readlink(cancel, header)
}

func (c countingFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	c.k[kAccess].Add(1)
	return c.RawFileSystem.Access(cancel, in)
}

func (c countingFS) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	c.k[kGetXAttr].Add(1)
	return c.RawFileSystem.GetXAttr(cancel, header, attr, dest)
}

func (c countingFS) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	c.k[kListXAttr].Add(1)
	return c.RawFileSystem.ListXAttr(cancel, header, dest)
}

func (c countingFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	c.k[kSetXAttr].Add(1)
	return c.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (c countingFS) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) fuse.Status {
	c.k[kRemoveXAttr].Add(1)
	return c.RawFileSystem.RemoveXAttr(cancel, header, attr)
}

func (c countingFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	c.k[kCreate].Add(1)
	return c.RawFileSystem.Create(cancel, in, name, out)
}

func (c countingFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	c.k[kTmpfile].Add(1)
	return c.RawFileSystem.Tmpfile(cancel, in, out)
}

func (c countingFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.k[kOpen].Add(1)
	return c.RawFileSystem.Open(cancel, in, out)
}

func (c countingFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	c.k[kRead].Add(1)
	return c.RawFileSystem.Read(cancel, in, buf)
}

func (c countingFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	c.k[kLseek].Add(1)
	return c.RawFileSystem.Lseek(cancel, in, out)
}

func (c countingFS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	c.k[kGetLk].Add(1)
	return c.RawFileSystem.GetLk(cancel, in, out)
}

func (c countingFS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	c.k[kSetLk].Add(1)
	return c.RawFileSystem.SetLk(cancel, in)
}

func (c countingFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	c.k[kSetLkw].Add(1)
	return c.RawFileSystem.SetLkw(cancel, in)
}

func (c countingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.k[kRelease].Add(1)
	c.RawFileSystem.Release(cancel, in)
}

func (c countingFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	c.k[kWrite].Add(1)
	return c.RawFileSystem.Write(cancel, in, data)
}

func (c countingFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	c.k[kCopyFileRange].Add(1)
	return c.RawFileSystem.CopyFileRange(cancel, in)
}

func (c countingFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	c.k[kFlush].Add(1)
	return c.RawFileSystem.Flush(cancel, in)
}

func (c countingFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	c.k[kFsync].Add(1)
	return c.RawFileSystem.Fsync(cancel, in)
}

func (c countingFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	c.k[kFallocate].Add(1)
	return c.RawFileSystem.Fallocate(cancel, in)
}

func (c countingFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.k[kOpenDir].Add(1)
	return c.RawFileSystem.OpenDir(cancel, in, out)
}

func (c countingFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.k[kReadDir].Add(1)
	return c.RawFileSystem.ReadDir(cancel, in, out)
}

func (c countingFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.k[kReadDirPlus].Add(1)
	return c.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (c countingFS) ReleaseDir(in *fuse.ReleaseIn) {
	c.k[kReleaseDir].Add(1)
	c.RawFileSystem.ReleaseDir(in)
}

func (c countingFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	c.k[kFsyncDir].Add(1)
	return c.RawFileSystem.FsyncDir(cancel, in)
}

func (c countingFS) StatFs(cancel <-chan struct{}, header *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	c.k[kStatFs].Add(1)
	return c.RawFileSystem.StatFs(cancel, header, out)
}

func (c countingFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	c.k[kStatx].Add(1)
	return c.RawFileSystem.Statx(cancel, in, out)
}

func (c countingFS) Forget(nodeid, nlookup uint64) {
	c.k[kForget].Add(1)
	c.RawFileSystem.Forget(nodeid, nlookup)
}

package fuseuring

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The ring tests mount in a process of their own (the test binary run
// again with daemonEnv set to the mountpoint): a request a ring entry
// holds ends only when its daemon dies, and a daemon in the test's own
// process could not (Known limit in doc.go).
const daemonEnv = "FUSEURING_TEST_DAEMON"

// testDepth is the daemon's Options.Depth: small, so that a test can
// hold more requests than that.
const testDepth = 4

func TestMain(m *testing.M) {
	if dir := os.Getenv(daemonEnv); dir != "" {
		os.Exit(runDaemon(dir))
	}
	os.Exit(m.Run())
}

// runDaemon serves a slowFS at dir over the rings until SIGTERM.
func runDaemon(dir string) int {
	fs := &slowFS{RawFileSystem: fuse.NewDefaultRawFileSystem(), release: make(chan struct{})}
	opts := &fuse.MountOptions{DirectMount: true, FsName: "fuseuring-test", Name: "fuseuring-test"}
	srv, rings, err := mount(fs, dir, opts, true, Options{Depth: testDepth, Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mount:", err)
		return 1
	}
	fs.rings.Store(rings)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	fs.releaseAll()
	if err := srv.Unmount(); err != nil {
		fmt.Fprintln(os.Stderr, "unmount:", err)
		return 1
	}
	return 0
}

// slowFS is the daemon's file system. Its root answers from memory
// GETATTR and GETXATTR: user.blocked gives how many LOOKUPs wait,
// user.handoffs the rings' HandOffs, others ENODATA. A LOOKUP of a name
// starting with "block" waits until a GETXATTR of user.release (not a
// SETXATTR: that waits for the root's inode lock, which the LOOKUPs hold
// shared) or SIGTERM, then answers ENOENT.
type slowFS struct {
	fuse.RawFileSystem
	rings   atomic.Pointer[Rings] // set once mounted
	blocked atomic.Int32
	release chan struct{}
	once    sync.Once
}

func (fs *slowFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if in.NodeId != fuse.FUSE_ROOT_ID {
		return fuse.ENOENT
	}
	out.Mode, out.Nlink, out.Ino = syscall.S_IFDIR|0o755, 2, 1
	return fuse.OK
}

func (fs *slowFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if strings.HasPrefix(name, "block") {
		fs.blocked.Add(1)
		<-fs.release
		fs.blocked.Add(-1)
	}
	return fuse.ENOENT
}

func (fs *slowFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	var v uint64
	switch attr {
	case "user.blocked":
		v = uint64(fs.blocked.Load())
	case "user.handoffs":
		v = fs.rings.Load().HandOffs()
	case "user.release":
		fs.releaseAll()
	default:
		return 0, fuse.ENOATTR
	}
	s := strconv.FormatUint(v, 10)
	if len(dest) < len(s) {
		return uint32(len(s)), fuse.ERANGE
	}
	return uint32(copy(dest, s)), fuse.OK
}

func (fs *slowFS) releaseAll() { fs.once.Do(func() { close(fs.release) }) }

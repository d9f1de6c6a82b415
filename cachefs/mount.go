package cachefs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/cachefs/cachefs/internal/fuseuring"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// MountOptions configure the kernel mount. The zero value works.
type MountOptions struct {
	// Debug logs every FUSE request.
	Debug bool
	// Name shows as the mount's source in /proc/mounts. Empty: "cachefs".
	Name string
	// URing serves the kernel over FUSE over io_uring (internal/fuseuring):
	// a queue per CPU answered on that CPU. Mount fails, saying why, where
	// the kernel cannot (enable_uring off, no io_uring).
	URing bool
	// URingOff says why a mount without URing is not served over
	// io_uring (cachefsd --uring auto where the kernel cannot); Stats
	// shows it.
	URingOff string
}

// mountMu makes mounts one at a time: a mount served over io_uring
// finds its /dev/fuse descriptor as the one new across fuse.NewServer.
var mountMu sync.Mutex

// Mount mounts fs at dir as the mount of its policy's modes (one
// connection for every mode, forwarding locks) and serves it in the
// background. Unmount with the returned server's Unmount.
func Mount(fs *FS, dir string, o MountOptions) (*fuse.Server, error) {
	opts := baseMountOptions(o)
	opts.EnableLocks = true
	// The host truncates at open: the kernel need not send a SETATTR.
	opts.ExtraCapabilities |= fuse.CAP_ATOMIC_O_TRUNC
	if fs.wb == nil || os.Geteuid() != 0 {
		// Passthrough is for the staging files of delegated subtrees
		// (passthrough.go); registering them needs CAP_SYS_ADMIN.
		opts.DisabledCapabilities = fuse.CAP_PASSTHROUGH
	}
	return serve(fs, fs, dir, opts, o)
}

// baseMountOptions are what every connection of the daemon negotiates.
func baseMountOptions(o MountOptions) *fuse.MountOptions {
	if o.Name == "" {
		o.Name = "cachefs"
	}
	root := os.Geteuid() == 0
	return &fuse.MountOptions{
		FsName:      o.Name,
		Name:        "cachefs",
		AllowOther:  root,
		DirectMount: root,
		// The kernel checks permissions against the attributes, as it
		// would for a local filesystem; ACCESS is never sent.
		Options:       []string{"default_permissions"},
		MaxWrite:      1 << 20,
		MaxReadAhead:  1 << 20,
		MaxBackground: 64,
		Debug:         o.Debug,
		// The kernel asks before each write whether security.capability
		// must go, unless the server handles killpriv itself.
		ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2,
	}
}

// serve mounts raw, the connection of fs, at dir and serves it.
func serve(raw fuse.RawFileSystem, fs *FS, dir string, opts *fuse.MountOptions, o MountOptions) (*fuse.Server, error) {
	if fs.up.Hello().ReadOnly {
		// The host refuses every change: the kernel does too, without
		// asking, and /proc/mounts says ro.
		opts.Options = append(opts.Options, "ro")
		opts.DirectMountFlags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_RDONLY
	}
	if abs, err := filepath.Abs(dir); err == nil {
		fs.opts.Mountpoint = abs
		fs.mounted.Store(abs)
	}
	fs.uringOff = o.URingOff
	if o.URing {
		if err := fuseuring.Supported(); err != nil {
			return nil, err
		}
		opts.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
	}
	counted := countingFS{raw, &fs.kops}
	srv, fd, err := newServer(counted, dir, opts)
	if err != nil {
		return nil, err
	}
	fs.expirer.setFD(fd, srv.KernelSettings())
	go srv.Serve()
	if o.URing {
		// The kernel holds every request until the rings are up.
		if err := fs.startRings(srv, fd, counted, opts); err != nil {
			srv.Unmount()
			return nil, err
		}
	}
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, err
	}
	fs.initPassthrough(srv)
	return srv, nil
}

// newServer mounts raw at dir and answers INIT. It returns the mount's
// /dev/fuse descriptor too, or -1 if it was not found.
func newServer(raw fuse.RawFileSystem, dir string, opts *fuse.MountOptions) (*fuse.Server, int, error) {
	mountMu.Lock()
	defer mountMu.Unlock()
	before := fuseuring.FDs()
	srv, err := fuse.NewServer(raw, dir, opts)
	if err != nil {
		return srv, -1, err
	}
	return srv, fuseuring.NewFD(before), nil
}

// startRings serves the kernel's requests over io_uring, answered by the
// same countingFS through a go-fuse ProtocolServer.
func (fs *FS) startRings(srv *fuse.Server, fd int, raw fuse.RawFileSystem, opts *fuse.MountOptions) error {
	if fd < 0 {
		return fmt.Errorf("io_uring: the mount's /dev/fuse descriptor was not found")
	}
	rings, err := fuseuring.Start(fd, srv.KernelSettings(), fuse.NewProtocolServer(raw, opts),
		fuseuring.Options{Payload: opts.MaxWrite + 4096, Logf: fs.opts.Logf})
	if err != nil {
		return fmt.Errorf("io_uring: %w", err)
	}
	fs.rings = rings
	return nil
}

// RingRequests returns how many kernel requests were answered over
// io_uring (0 unless mounted with URing).
func (fs *FS) RingRequests() uint64 {
	if fs.rings == nil {
		return 0
	}
	return fs.rings.Requests()
}

// ringHandOffs returns how many times a request took long enough over
// io_uring for another thread to take its queue over.
func (fs *FS) ringHandOffs() uint64 {
	if fs.rings == nil {
		return 0
	}
	return fs.rings.HandOffs()
}

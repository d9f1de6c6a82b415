package cachefs

import (
	"os"
	"path/filepath"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// MountOptions configure the kernel mount. The zero value works.
type MountOptions struct {
	// Debug logs every FUSE request.
	Debug bool
	// Name shows as the mount's source in /proc/mounts. Empty: "cachefs".
	Name string
}

// Mount mounts fs at dir and serves it in the background. Unmount with
// the returned server's Unmount.
func Mount(fs *FS, dir string, o MountOptions) (*fuse.Server, error) {
	if o.Name == "" {
		o.Name = "cachefs"
	}
	root := os.Geteuid() == 0
	opts := &fuse.MountOptions{
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
		EnableLocks:   true,
		Debug:         o.Debug,
		// The kernel asks before each write whether security.capability
		// must go, unless the server handles killpriv itself.
		ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_ATOMIC_O_TRUNC,
	}
	if fs.wb == nil || !root {
		// Passthrough is for the staging files of delegated subtrees
		// (passthrough.go); registering them needs CAP_SYS_ADMIN.
		opts.DisabledCapabilities = fuse.CAP_PASSTHROUGH
	}
	if abs, err := filepath.Abs(dir); err == nil {
		fs.opts.Mountpoint = abs
	}
	srv, err := fuse.NewServer(countingFS{fs}, dir, opts)
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, err
	}
	fs.initPassthrough(srv)
	return srv, nil
}

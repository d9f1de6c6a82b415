package fuseuring

import (
	"errors"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Mount mounts fs at dir with opts and serves it over /dev/fuse, or,
// with ring, over one queue per CPU: it asks for CAP_OVER_IO_URING
// beside opts' own capabilities and starts the rings after go-fuse
// answered INIT, before the first request is awaited. The mount's
// /dev/fuse descriptor is the one new across fuse.NewServer, so no
// other mount may be made in this process meanwhile (cachefs, which
// mounts concurrently, serializes its mounts itself).
func Mount(fs fuse.RawFileSystem, dir string, opts *fuse.MountOptions, ring bool, o Options) (*fuse.Server, error) {
	srv, _, err := mount(fs, dir, opts, ring, o)
	return srv, err
}

// mount is Mount, which returns the rings too (nil over /dev/fuse).
func mount(fs fuse.RawFileSystem, dir string, opts *fuse.MountOptions, ring bool, o Options) (*fuse.Server, *Rings, error) {
	var before map[int]bool
	if ring {
		if err := Supported(); err != nil {
			return nil, nil, err
		}
		opts.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
		before = FDs()
	}
	srv, err := fuse.NewServer(fs, dir, opts) // answers INIT before it returns
	if err != nil {
		return nil, nil, err
	}
	go srv.Serve()
	var rings *Rings
	if ring {
		if rings, err = startFor(srv, fs, opts, before, o); err != nil {
			srv.Unmount()
			return nil, nil, err
		}
	}
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, nil, err
	}
	return srv, rings, nil
}

// startFor serves srv's mount over the rings, answered by a
// ProtocolServer over fs.
func startFor(srv *fuse.Server, fs fuse.RawFileSystem, opts *fuse.MountOptions, before map[int]bool, o Options) (*Rings, error) {
	fd := NewFD(before)
	if fd < 0 {
		return nil, errors.New("no new /dev/fuse descriptor")
	}
	return Start(fd, srv.KernelSettings(), fuse.NewProtocolServer(fs, opts), o)
}

// Package inproc runs both halves of cachefs in one process: a host
// server on a unix socket, a client of it and a guest mount. `cachefsd
// local` and the benchmarks use it; the tests reach it through
// internal/harness, which adds what only tests need. It links no
// test helper: `go list -deps ./cmd/cachefsd` shows no package testing
// (TestNoTestingInDaemon in cmd/cachefsd).
package inproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Options configure a Pair. The zero value of each field but Export and
// Mountpoint is a working default.
type Options struct {
	Export     string                 // directory to export; required
	Mountpoint string                 // where to mount; required
	Socket     string                 // unix socket path; empty: a temporary one
	Server     upstream.ServerOptions // Export is filled in; the client shares Secret
	LinkDelay  time.Duration
	Policy     *consistency.Policy // shorthand for FS.Policy
	CacheTTL   time.Duration       // shorthand for FS.CacheTTL
	StateDir   string              // shorthand for FS.StateDir
	FS         cachefs.Options     // Client is filled in
	Debug      bool
	URing      bool   // serve the kernel over io_uring (cachefs.MountOptions.URing)
	URingOff   string // why not, if io_uring was wanted (cachefs.MountOptions.URingOff)
	// OneConnection serves every mode over the main connection (Guest
	// registrations go to its policy, as FS.Register does).
	OneConnection bool
	// NoCachedXattrs serves the cached connection without extended
	// attributes (cachefs.GuestOptions.NoCachedXattrs).
	NoCachedXattrs bool
	// HostTimeout bounds the client's wait for a host that is down
	// (upstream.HostTimeout). Zero: the client's default; negative: no
	// bound (hard).
	HostTimeout time.Duration
	Logf        func(format string, args ...any)
}

// Pair is a running server, client and mount.
type Pair struct {
	Server     *upstream.Server
	Listener   net.Listener
	Client     *upstream.Client
	FS         *cachefs.FS // the main connection's
	Guest      *cachefs.Guest
	Mount      *fuse.Server
	Socket     string
	Export     string
	Mountpoint string
	tmp        string
}

// Launch starts a server, connects a client and mounts.
func Launch(o Options) (*Pair, error) {
	e := &Pair{Socket: o.Socket, Export: o.Export, Mountpoint: o.Mountpoint}
	if e.Socket == "" {
		dir, err := os.MkdirTemp("", "cachefs-sock")
		if err != nil {
			return nil, err
		}
		e.tmp = dir
		e.Socket = filepath.Join(dir, "s")
	}
	if err := e.start(o); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Pair) start(o Options) error {
	so := o.Server
	so.Export = o.Export
	if so.Logf == nil {
		so.Logf = o.Logf
	}
	srv, err := upstream.NewServer(so)
	if err != nil {
		return err
	}
	e.Server = srv
	if e.Listener, err = upstream.Listen("unix://" + e.Socket); err != nil {
		return err
	}
	go srv.Serve(e.Listener)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	co := upstream.ClientOptions{Addr: "unix://" + e.Socket, LinkDelay: o.LinkDelay, Secret: so.Secret, Logf: o.Logf}
	if o.HostTimeout != 0 {
		co.Timeout, co.Reconnect = upstream.HostTimeout(o.HostTimeout)
	}
	e.Client, err = upstream.NewClient(ctx, co)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	fo := o.FS
	fo.Client = e.Client
	if o.Policy != nil {
		fo.Policy = o.Policy
	}
	if o.CacheTTL != 0 {
		fo.CacheTTL = o.CacheTTL
	}
	if o.StateDir != "" {
		fo.StateDir = o.StateDir
	}
	if fo.Logf == nil {
		fo.Logf = o.Logf
	}
	if e.FS, err = cachefs.New(fo); err != nil {
		return err
	}
	mo := cachefs.MountOptions{Debug: o.Debug, URing: o.URing, URingOff: o.URingOff}
	if e.Mount, err = cachefs.Mount(e.FS, o.Mountpoint, mo); err != nil {
		return err
	}
	if e.tmp == "" {
		if e.tmp, err = os.MkdirTemp("", "cachefs-run"); err != nil {
			return err
		}
	}
	e.Guest, err = cachefs.NewGuest(e.FS, cachefs.GuestOptions{RunDir: filepath.Join(e.tmp, "conn"), Mount: mo,
		OneConnection: o.OneConnection, NoCachedXattrs: o.NoCachedXattrs})
	return err
}

// Close unmounts and stops everything.
func (e *Pair) Close() error {
	var err error
	if e.FS != nil {
		e.FS.WriteBack() // a clean shutdown leaves nothing in the journal
		err = e.FS.CloseOverlays()
	}
	if e.Guest != nil {
		if gerr := e.Guest.Close(); gerr != nil {
			err = gerr
		}
		e.Guest = nil
	}
	if e.Mount != nil {
		if uerr := unmount(e.Mount, e.Mountpoint); uerr != nil {
			err = uerr
		} else {
			e.FS.WaitStopped(10 * time.Second) // its state directory is held until then
		}
		e.Mount = nil
	}
	e.Disconnect()
	return err
}

// Disconnect closes the client and stops the server, leaving the mount
// to the caller (cachefsd local unmounts it itself): requests still
// waiting for the host fail.
func (e *Pair) Disconnect() {
	if e.Client != nil {
		e.Client.Close()
		e.Client = nil
	}
	if e.Listener != nil {
		e.Listener.Close()
		e.Listener = nil
	}
	if e.Server != nil {
		e.Server.Close()
		e.Server = nil
	}
	if e.tmp != "" {
		// One entry at a time, never recursively: a connection's mount
		// under conn/ that could not be taken down leads to the export.
		os.Remove(filepath.Join(e.tmp, "s"))
		os.Remove(filepath.Join(e.tmp, "conn"))
		os.Remove(e.tmp)
	}
}

// unmount retries while the mount is busy for a moment after use, then
// detaches it lazily (a file left open must not wedge the caller).
func unmount(s *fuse.Server, dir string) error {
	var err error
	for i := 0; i < 10; i++ {
		if err = s.Unmount(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	if derr := unix.Unmount(dir, unix.MNT_DETACH); derr != nil {
		return fmt.Errorf("%v; lazy unmount: %v", err, derr)
	}
	return nil
}

//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	_ "net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/inproc"
	"github.com/cachefs/cachefs/upstream"
)

// guestFlags are the flags of the guest side, shared by mount and local.
type guestFlags struct {
	linkDelay   time.Duration
	defaultMode string
	ctl         string
	debug       bool
	cacheTTL    time.Duration
	limits      cachefs.CacheLimits
	stateDir    string
	secretFile  string
	pprof       string
	metrics     string // metrics.go
	uring       string // auto, on or off (uring.go)
	oneConn     bool
	xattrs      bool // of the cached connection
	overlay     bool
	hostTimeout hostTimeout // hosttimeout.go
}

func (g *guestFlags) register(fl *flag.FlagSet) {
	fl.DurationVar(&g.linkDelay, "link-delay", 0, "one-way delay added to each message (models a VM link, e.g. 50us)")
	fl.StringVar(&g.defaultMode, "default-mode", "consistent", "mode of unregistered paths: consistent, cached or delegated")
	fl.StringVar(&g.ctl, "ctl", defaultCtlSocket(), "control socket path")
	fl.BoolVar(&g.debug, "debug", false, "log every FUSE request")
	fl.StringVar(&g.uring, "uring", defaultURing, "serve the kernel over FUSE over io_uring, a queue per CPU: auto (where the kernel has it on, else /dev/fuse), on (turn it on, or fail) or off (/dev/fuse); see uring.go")
	fl.DurationVar(&g.cacheTTL, "cache-ttl", 30*time.Second, "longest a cached subtree trusts metadata without news from the host")
	fl.IntVar(&g.limits.DirBytes, "cache-dir-bytes", 64<<20, "bound on cached names and listings, bytes")
	fl.IntVar(&g.limits.AttrBytes, "cache-attr-bytes", 16<<20, "bound on cached attributes, bytes")
	fl.StringVar(&g.metrics, "metrics", "", "serve Prometheus metrics of what ctl stats shows on http://ADDR/metrics (e.g. 127.0.0.1:9464)")
	fl.StringVar(&g.pprof, "pprof", "", "serve Go's net/http/pprof profiles on this address (e.g. 127.0.0.1:6060)")
	fl.StringVar(&g.secretFile, "secret-file", "", "file holding the secret shared with the host (as serve's --secret-file)")
	fl.BoolVar(&g.oneConn, "one-connection", false, "serve every mode over the one kernel connection at the mountpoint, instead of each registered mode over a connection of its own")
	fl.BoolVar(&g.xattrs, "cached-xattrs", true, "serve extended attributes and ACLs in cached subtrees; without them (=false) the guest kernel answers a warm `ls -l` alone (docs/connections.md)")
	fl.BoolVar(&g.overlay, "overlay", true, "serve delegated registrations as overlays over a cached view, written back from the state directory (docs/overlay.md); where no overlay can be mounted (not root, no overlayfs, a host without tree write-back) they are FUSE delegated and the log and ctl stats say why; =false: always FUSE delegated")
	fl.Var(&g.hostTimeout, "host-timeout", "how long a request waits for a host that is down before it fails with EIO: a duration, or hard to wait as long as it takes; a fatal signal always ends the wait (docs/faults.md)")
	fl.StringVar(&g.stateDir, "state-dir", "", "write-back journal of delegated subtrees and their overlays' upper directories, kept across restarts (default: under "+defaultStateDir()+", one per mountpoint)")
}

func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/cachefsd"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "cachefsd")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("cachefsd-state-%d", os.Getuid()))
}

// options returns the filesystem's options for a mount at mnt.
func (g *guestFlags) options(c *upstream.Client, pol *consistency.Policy, mnt string) cachefs.Options {
	if g.stateDir == "" {
		g.stateDir = stateDirFor(mnt)
	}
	return cachefs.Options{Client: c, Policy: pol, CacheTTL: g.cacheTTL, CacheLimits: g.limits, StateDir: g.stateDir,
		Overlays: g.overlay}
}

// secret reads --secret-file; nil without one.
func (g *guestFlags) secret() ([]byte, error) {
	if g.secretFile == "" {
		return nil, nil
	}
	return upstream.ReadSecret(g.secretFile)
}

func (g *guestFlags) policy() (*consistency.Policy, error) {
	m, err := consistency.ParseMode(g.defaultMode)
	if err != nil {
		return nil, err
	}
	if g.rootOverlay() {
		m = consistency.Cached // the overlay's lower view
	}
	return consistency.NewPolicy(m), nil
}

// rootOverlay reports whether the mount root is to be delegated as an
// overlay (--default-mode delegated, --overlay): the main connection
// then serves the root cached, and run registers the root delegated
// before the mount is announced, which mounts an overlay over the
// mountpoint (or, where none can be mounted, registers the root FUSE
// delegated: the mount is then as --overlay=false makes it).
func (g *guestFlags) rootOverlay() bool {
	return g.overlay && g.defaultMode == consistency.Delegated.String()
}

func defaultCtlSocket() string {
	if os.Geteuid() == 0 {
		return "/run/cachefsd.sock"
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("cachefsd-%d.sock", os.Getuid()))
}

// parseGuest parses the flags of a guest command: the shared ones, a
// required string flag named req, and one mountpoint argument.
func parseGuest(cmd string, args []string, reqVal *string, req, usage string) (*flag.FlagSet, *guestFlags, *consistency.Policy, error) {
	fl := flag.NewFlagSet(cmd, flag.ExitOnError)
	fl.StringVar(reqVal, req, "", usage)
	g := &guestFlags{}
	g.register(fl)
	fl.Parse(args)
	if err := checkGuestArgs(cmd, req, *reqVal, fl.Args()); err != nil {
		return nil, nil, nil, err
	}
	pol, err := g.policy()
	if g.pprof != "" {
		// Lock waits show in the mutex and block profiles too.
		runtime.SetMutexProfileFraction(10)
		runtime.SetBlockProfileRate(100000)
		go func() { log.Printf("cachefsd: pprof: %v", http.ListenAndServe(g.pprof, nil)) }()
	}
	return fl, g, pol, err
}

func mount(args []string) error {
	var addr string
	fl, g, pol, err := parseGuest("mount", args, &addr, "upstream", "host server address (required)")
	if err != nil {
		return err
	}
	uring, off, err := g.useURing() // before cachefs.New makes the state directory
	if err != nil {
		return err
	}
	secret, err := g.secret()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := upstream.NewClient(ctx, g.hostTimeout.clientOptions(upstream.ClientOptions{Addr: addr, LinkDelay: g.linkDelay, Secret: secret}))
	if err != nil {
		return err
	}
	fs, err := cachefs.New(g.options(c, pol, fl.Arg(0)))
	if err != nil {
		return err
	}
	mo := cachefs.MountOptions{Debug: g.debug, Name: addr, URing: uring, URingOff: off}
	srv, err := cachefs.Mount(fs, fl.Arg(0), mo)
	if err != nil {
		g.removeStateDir(fs, fl.Arg(0))
		return err
	}
	guest, err := cachefs.NewGuest(fs, cachefs.GuestOptions{RunDir: filepath.Join(g.stateDir, "conn"), Mount: mo,
		OneConnection: g.oneConn, NoCachedXattrs: !g.xattrs})
	if err != nil {
		srv.Unmount()
		g.removeStateDir(fs, fl.Arg(0))
		return err
	}
	return g.run(guest, srv, fl.Arg(0), addr, func() { c.Close() })
}

func local(args []string) error {
	var export string
	fl, g, pol, err := parseGuest("local", args, &export, "export", "directory to export (required)")
	if err != nil {
		return err
	}
	secret, err := g.secret()
	if err != nil {
		return err
	}
	o := g.localOptions(export, fl.Arg(0), pol, secret)
	if o.URing, o.URingOff, err = g.useURing(); err != nil {
		return err
	}
	env, err := inproc.Launch(o)
	if err != nil {
		return err
	}
	return g.run(env.Guest, env.Mount, fl.Arg(0), export, env.Disconnect)
}

// localOptions returns the host and guest of `cachefsd local`, in one
// process. The guest's state directory is unwatched: its staging files
// and journal may lie on the export's filesystem, and the host's
// fanotify mark would report each write to them.
func (g *guestFlags) localOptions(export, mnt string, pol *consistency.Policy, secret []byte) inproc.Options {
	fo := g.options(nil, pol, mnt)
	return inproc.Options{Export: export, Mountpoint: mnt, FS: fo, OneConnection: g.oneConn, NoCachedXattrs: !g.xattrs,
		Server:    upstream.ServerOptions{Secret: secret, Unwatched: []string{fo.StateDir}},
		LinkDelay: g.linkDelay, Debug: g.debug, Logf: log.Printf, HostTimeout: g.hostTimeout.duration()}
}

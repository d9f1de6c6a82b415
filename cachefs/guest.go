package cachefs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A Guest is one guest daemon's kernel connections (docs/connections.md).
// The main connection, mounted at the mountpoint, serves the default
// mode. A registration of a subtree in another mode bind-mounts that
// subtree, as the mode's own connection shows it, over the same path of
// the mountpoint (guest_bind.go): every bind mount a container runtime
// makes of the path afterwards gets that mode, and the kernel answers
// as that mode's connection negotiated. Connections other than the main
// one are mounted under RunDir when first needed.
//
// Registrations the per-mode connections do not serve yet (delegated,
// and every mode with OneConnection) go to the main connection's policy,
// as when one connection served every mode.

// GuestOptions configure a Guest. The zero value of each field but
// RunDir is a working default.
type GuestOptions struct {
	// RunDir holds the mounts of the connections other than the main
	// one, a directory each, made and removed by the Guest. Required.
	RunDir string
	// Mount configures those connections' kernel mounts.
	Mount MountOptions
	// OneConnection serves every mode over the main connection, whose
	// policy then holds the registrations.
	OneConnection bool
	// WatchedTTL is how long the cached connection trusts what it
	// caches while the host reports changes. Zero: an hour.
	WatchedTTL time.Duration
	// NoCachedXattrs serves the cached connection without extended
	// attributes, so that the kernel answers a warm `ls -l` alone
	// (noXattrConn).
	NoCachedXattrs bool
}

// Guest is a guest daemon's set of connections and registrations.
type Guest struct {
	main     *FS          // immutable: the default mode's connection
	opts     GuestOptions // immutable
	mainRoot int          // immutable: O_PATH descriptor of a bare view of the main connection (RunDir/main)
	mnt      string       // immutable: the mountpoint

	mu      sync.Mutex          // protects the following; held across mounts
	regs    *consistency.Policy // registrations, reference-counted
	legacy  map[uint64]uint64   // registration id -> the main policy's id
	cached  *conn               // nil until a cached registration needs it
	applied []bound             // binds made on the mountpoint, in order
	closed  bool
	unwatch []*os.File // closed to stop watching mounts (guest_watch.go); mu
}

// conn is a connection other than the main one.
type conn struct {
	fs   *FS
	srv  *fuse.Server
	dir  string // its mountpoint under RunDir
	root int    // O_PATH descriptor of its root
}

// NewGuest returns the Guest of main, mounted at its mountpoint by Mount.
func NewGuest(main *FS, o GuestOptions) (*Guest, error) {
	if o.RunDir == "" {
		return nil, fmt.Errorf("cachefs: GuestOptions.RunDir is required")
	}
	if o.WatchedTTL == 0 {
		o.WatchedTTL = time.Hour
	}
	clearStale(o.RunDir)
	mnt := main.opts.Mountpoint
	id, err := mountOf(mnt)
	if err != nil {
		return nil, fmt.Errorf("cachefs: the mount at %s: %w", mnt, err)
	}
	root, err := cloneAt(mnt, filepath.Join(o.RunDir, "main"))
	if err != nil {
		return nil, fmt.Errorf("cachefs: a view of the main connection: %w", err)
	}
	main.actRoot.Store(filepath.Join(o.RunDir, "main"))
	g := &Guest{main: main, opts: o, mainRoot: root, mnt: mnt,
		regs: consistency.NewPolicy(main.policy.Default()), legacy: map[uint64]uint64{}}
	g.startWatchMain(id)
	return g, nil
}

// clearStale detaches what a killed daemon left mounted in runDir: its
// connections are gone, their mounts answer ENOTCONN.
func clearStale(runDir string) {
	for _, name := range []string{"main", "cached"} {
		unix.Unmount(filepath.Join(runDir, name), unix.MNT_DETACH)
	}
}

// cloneAt attaches a clone of the mount at src on dir, which it makes,
// and returns an O_PATH descriptor of it: the main connection as no bind
// covers it, for the sources of its own binds.
func cloneAt(src, dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return -1, err
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(tree)
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return -1, fmt.Errorf("attaching on %s: %w", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
	}
	return fd, err
}

// RunDir returns where the other connections are mounted.
func (g *Guest) RunDir() string { return g.opts.RunDir }

// Main returns the main connection's file system.
func (g *Guest) Main() *FS { return g.main }

// Register gives the subtree at path (relative to the mountpoint) mode
// m for every bind mount made of it after Register returns.
func (g *Guest) Register(path string, m consistency.Mode) (uint64, error) {
	path = consistency.Clean(path)
	g.mu.Lock()
	defer g.mu.Unlock()
	id := g.regs.Register(path, m)
	if r, _ := g.regs.Get(id); r.Refs > 1 {
		return id, nil // one more user of a registration in place
	}
	if !g.bindsMode(m) {
		g.legacy[id] = g.main.Register(path, m)
		return id, nil
	}
	if err := g.rebuild(path); err != nil {
		g.regs.Unregister(id)
		g.rebuild(path)
		return 0, err
	}
	return id, nil
}

// Unregister drops one reference to registration id; the last one
// undoes it (binds are detached lazily: whoever uses them keeps them).
func (g *Guest) Unregister(id uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	reg, gone, ok := g.regs.Unregister(id)
	if !ok {
		return fmt.Errorf("no registration %d", id)
	}
	if !gone {
		return nil
	}
	if mid, ok := g.legacy[id]; ok {
		delete(g.legacy, id)
		return g.main.Unregister(mid)
	}
	return g.rebuild(reg.Path)
}

// Registrations lists the registrations, ordered by path.
func (g *Guest) Registrations() []consistency.Registration { return g.regs.List() }

// bindsMode reports whether registrations of m are served by a bind
// from a connection of m's own.
func (g *Guest) bindsMode(m consistency.Mode) bool {
	if g.opts.OneConnection {
		return false
	}
	switch m {
	case consistency.Cached:
		return true
	case consistency.Consistent:
		return g.main.policy.ModeFor("") == consistency.Consistent
	}
	return false
}

// Stats are the main connection's counters, with the cached
// connection's beside them once it exists.
func (g *Guest) Stats() Stats {
	st := g.main.Stats()
	g.mu.Lock()
	c := g.cached
	g.mu.Unlock()
	if c != nil {
		cs := c.fs.Stats()
		st.Cached = &cs
	}
	return st
}

// cachedConn returns the cached connection, mounting it if need be.
// Needs g.mu.
func (g *Guest) cachedConnLocked() (*conn, error) {
	if g.cached != nil {
		return g.cached, nil
	}
	if g.closed {
		return nil, fmt.Errorf("cachefs: the guest is shutting down")
	}
	ttl := g.main.ttl
	if g.main.up.Has(upstream.FeatEvents) {
		ttl = g.opts.WatchedTTL // the host watches the export (watchDefault)
	}
	fs, err := g.main.newPeer(Options{Policy: consistency.NewPolicy(consistency.Cached), CacheTTL: ttl,
		CacheLimits: g.main.opts.CacheLimits, NoActuator: g.main.act == nil})
	if err != nil {
		return nil, err
	}
	mount := MountCached
	if g.opts.NoCachedXattrs {
		mount = MountCachedNoXattrs
	}
	c, err := g.mountConn(fs, "cached", mount)
	if err != nil {
		fs.OnUnmount()
		return nil, err
	}
	g.cached = c
	return c, nil
}

// mountConn mounts fs under RunDir/name with mount.
func (g *Guest) mountConn(fs *FS, name string, mount func(*FS, string, MountOptions) (*fuse.Server, error)) (*conn, error) {
	dir := filepath.Join(g.opts.RunDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	mo := g.opts.Mount
	mo.Name = g.opts.Mount.Name + ":" + name
	srv, err := mount(fs, dir, mo)
	if err != nil {
		return nil, fmt.Errorf("cachefs: mounting the %s connection at %s: %w", name, dir, err)
	}
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		srv.Unmount()
		return nil, err
	}
	return &conn{fs: fs, srv: srv, dir: dir, root: root}, nil
}

// Close detaches every bind and unmounts the connections other than the
// main one; the caller unmounts the main one.
func (g *Guest) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	for _, w := range g.unwatch {
		w.Close()
	}
	g.detach("")
	g.main.actRoot.Store(g.mnt)
	unix.Close(g.mainRoot)
	unix.Unmount(filepath.Join(g.opts.RunDir, "main"), unix.MNT_DETACH)
	var err error
	if c := g.cached; c != nil {
		g.cached = nil
		err = c.close()
	}
	// Only empty directories: one whose unmount failed keeps its files.
	os.Remove(filepath.Join(g.opts.RunDir, "main"))
	os.Remove(g.opts.RunDir)
	return err
}

// close unmounts c, lazily if it is still in use, and waits a moment
// for its file system to stop: a bind that could not be detached keeps
// the connection serving until its last user goes, and nobody waits
// for that.
func (c *conn) close() error {
	unix.Close(c.root)
	err := unix.Unmount(c.dir, 0)
	if err != nil {
		err = unix.Unmount(c.dir, unix.MNT_DETACH)
	}
	if c.fs.WaitStopped(5 * time.Second) {
		os.Remove(c.dir)
	} else {
		c.fs.opts.Logf("cachefs: the connection at %s is still in use: it serves until its last user goes", c.dir)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", c.dir, err)
	}
	return nil
}

package cachefs

import (
	"context"
	"errors"
	"log"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/fuseuring"
	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options configure the guest filesystem. The zero value of each field
// but Client is a working default.
type Options struct {
	// Client is the connection to the host server. Required.
	Client *upstream.Client
	// Policy maps paths to consistency modes. Nil: consistent everywhere.
	Policy *consistency.Policy
	// CacheTTL bounds how long cached metadata and data are trusted
	// without news from the host, in modes that cache. Zero: 30s.
	CacheTTL time.Duration
	// CacheLimits bound the metadata cache's memory.
	CacheLimits CacheLimits
	// StateDir holds the write-back journal and staged file contents of
	// delegated subtrees. Empty: delegated subtrees behave as cached.
	StateDir string
	// WritebackLimits bound what waits for write-back.
	WritebackLimits WritebackLimits
	// Overlays serves delegated registrations as overlays over a cached
	// view, written back from their upper directories in StateDir
	// (overlay_glue.go), where overlays can be mounted (Stats.OverlaysOff
	// says why not). False: delegated subtrees are FUSE's. Overlay
	// directories a previous daemon left are written back either way.
	Overlays bool
	// NoActuator turns off raising inotify events in the guest for host
	// changes; caches are still invalidated.
	NoActuator bool
	// Mountpoint is where the filesystem is mounted, for naming paths in
	// control requests. Mount sets it.
	Mountpoint string
	// Logf logs unexpected errors. Nil: log.Printf.
	Logf func(format string, args ...any)
}

// FS is the guest side of cachefs as a raw FUSE filesystem: each kernel
// request is answered from the guest's caches where the node's mode
// allows, else forwarded to the host.
type FS struct {
	fuse.RawFileSystem

	opts       Options                // immutable after New
	up         *upstream.Client       // immutable
	nodes      *nodeTable             // immutable pointer
	handles    *handleTable           // immutable pointer
	forgets    *forgetQueue           // immutable pointer
	policy     *consistency.Policy    // immutable pointer
	cache      *metaCache             // immutable pointer
	kops       kernelCounts           // atomic: the kernel's requests (kernelops.go)
	act        *invalidation.Actuator // immutable; nil with NoActuator
	actQueue   chan actBatch          // immutable: batches for the actuator
	actStop    chan struct{}          // immutable: closed at unmount
	actDone    chan struct{}          // immutable: closed when the actuations stopped
	evStats    eventStats
	actPending actPending
	watches    watchSet
	wb         *writeback       // nil without a state directory
	ovl        *overlays        // nil without a state directory or a host with FeatTreeWB
	ovlOff     string           // immutable after New: why ovl is nil
	ttl        time.Duration    // immutable
	rings      *fuseuring.Rings // set by Mount before the first request; nil without URing
	uringOff   string           // set by Mount: MountOptions.URingOff
	set        *connSet         // immutable: the connections sharing fs.up
	expirer    expirer          // set up by Mount (notify_expire.go)
	actRoot    atomic.Value     // string: where the actuator reaches this connection (guestPath)
	mounted    atomic.Value     // string: opts.Mountpoint as serve set it, for the actuator, which runs from New on
	stopOnce   sync.Once
	stopped    chan struct{} // closed once background work stopped (OnUnmount)

	mu     sync.Mutex // protects server
	server *fuse.Server
}

// New returns the filesystem for a connected client. Changes a previous
// daemon journaled in StateDir are written back before it returns.
func New(opts Options) (*FS, error) { return newFS(opts, nil) }

// newPeer returns the file system of another kernel connection of fs's
// daemon (peers.go): the same upstream session and events, nodes and
// caches of its own, no write-back.
func (fs *FS) newPeer(o Options) (*FS, error) {
	o.Client, o.Logf, o.StateDir = fs.up, fs.opts.Logf, ""
	return newFS(o, fs.set)
}

// newFS makes a file system, the first of a new connection set or one
// more of set.
func newFS(opts Options, set *connSet) (*FS, error) {
	if opts.Logf == nil {
		opts.Logf = log.Printf
	}
	if opts.Policy == nil {
		opts.Policy = consistency.NewPolicy(consistency.Consistent)
	}
	h := opts.Client.Hello()
	fs := &FS{RawFileSystem: fuse.NewDefaultRawFileSystem(), opts: opts, up: opts.Client, expirer: expirer{fd: -1},
		stopped: make(chan struct{}),
		nodes:   newNodeTable(h.Root.Node, opts.Client.Epoch()), handles: newHandleTable(),
		policy: opts.Policy}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = 30 * time.Second
	}
	fs.ttl = opts.CacheTTL
	fs.forgets = newForgetQueue(fs)
	fs.nodes.dropRefs = fs.forgets.add
	fs.cache = newMetaCache(fs.ttl, opts.CacheLimits, fs.nodes.pin, fs.unpin)
	fs.actPending.m = map[kernelName]actPend{}
	fs.watches.byReg = map[uint64]*node{}
	fs.mounted.Store(opts.Mountpoint)
	if !opts.NoActuator {
		fs.act = invalidation.NewActuator()
		fs.actQueue = make(chan actBatch, 64)
		fs.actStop, fs.actDone = make(chan struct{}), make(chan struct{})
		go fs.runActuations()
	}
	if fs.set = set; set == nil {
		fs.set = newConnSet(fs)
	} else {
		set.add(fs)
	}
	if opts.StateDir != "" {
		wb, err := newWriteback(fs, opts.StateDir, opts.WritebackLimits)
		if err != nil {
			return nil, err
		}
		fs.wb = wb
	}
	if err := fs.startOverlays(); err != nil {
		return nil, err
	}
	fs.watchDefault()
	if fs.wb != nil {
		if failed := fs.wb.wait(); len(failed) > 0 {
			fs.opts.Logf("cachefs: %d journaled changes could not be written back: %+v", len(failed), failed)
		}
	}
	return fs, nil
}

func (fs *FS) String() string { return "cachefs" }

// Init is called by go-fuse when the mount is ready.
func (fs *FS) Init(s *fuse.Server) {
	fs.mu.Lock()
	fs.server = s
	fs.mu.Unlock()
}

// call sends one request upstream. If the host session was lost under
// it, node ids are re-resolved by f's next run: f is run at most twice.
func (fs *FS) call(f func(epoch uint64) error) fuse.Status {
	var err error
	for i := 0; i < 2; i++ {
		err = f(fs.up.Epoch())
		if !errors.Is(err, upstream.ErrSessionLost) {
			break
		}
	}
	return fs.status(err)
}

// status maps an error to the errno returned to the kernel.
func (fs *FS) status(err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fuse.Status(errno)
	}
	if errors.Is(err, upstream.ErrSessionLost) {
		return fuse.Status(syscall.ESTALE)
	}
	if errors.Is(err, context.Canceled) {
		return fuse.EINTR
	}
	fs.opts.Logf("cachefs: %v", err)
	return fuse.EIO
}

// rpc is rpcFor for work no kernel request waits on.
func (fs *FS) rpc(op upstream.Op, req, resp any) error {
	return fs.rpcFor(context.Background(), 0, op, req, resp)
}

// rpcFor is fs.up.CallIn for a kernel request whose waits end with ctx
// (a waitCtx: when its caller is dying) and whose host ids belong to
// epoch (0: it has none, or does not say). A change it made reaches the
// daemon's other connections before it returns (peers.go).
func (fs *FS) rpcFor(ctx context.Context, epoch uint64, op upstream.Op, req, resp any) error {
	err := fs.up.CallIn(ctx, epoch, op, req, resp)
	if err == nil && changes[op] {
		fs.ownChange(op, req)
	}
	return err
}

// changes are the ops that change the host's tree or attributes.
var changes = map[upstream.Op]bool{upstream.OpSetattr: true, upstream.OpSetxattr: true,
	upstream.OpRemovexattr: true, upstream.OpCreate: true, upstream.OpMknod: true, upstream.OpMkdir: true,
	upstream.OpSymlink: true, upstream.OpLink: true, upstream.OpUnlink: true, upstream.OpRmdir: true,
	upstream.OpRename: true}

// upID is upIDFor for work no kernel request waits on.
func (fs *FS) upID(n *node, epoch uint64) (uint64, error) {
	return fs.upIDFor(context.Background(), n, epoch)
}

// upIDFor returns n's host id in epoch, looking it up again through its
// parent if the host session changed since it was found: ESTALE if the
// name is another file's now (another host inode number).
func (fs *FS) upIDFor(ctx context.Context, n *node, epoch uint64) (uint64, error) {
	if up, ok := fs.nodes.upOf(n, epoch); ok {
		return up, nil
	}
	if n.id == rootID {
		fs.nodes.rebind(n, fs.up.Hello().Root.Node, epoch)
		return fs.upIDFor(ctx, n, epoch)
	}
	if fs.wb != nil && fs.fresh(n) {
		// Made in the guest: found by name once the host has it, and its
		// name on the host is the guest's once all changes are written back.
		fs.writeBackFirst()
	}
	parent, name := fs.nodes.where(n)
	if parent == nil {
		return 0, syscall.ESTALE
	}
	pup, err := fs.upIDFor(ctx, parent, epoch)
	if err != nil {
		return 0, err
	}
	var resp upstream.EntryResp
	if err := fs.rpcFor(ctx, epoch, upstream.OpLookup, &upstream.LookupReq{Parent: pup, Name: name}, &resp); err != nil {
		return 0, err
	}
	if ino := fs.nodes.inoOf(n); ino != 0 && ino != resp.Entry.Attr.Ino {
		// Another file has the name now: n, and its open files, are gone.
		fs.forgets.add(resp.Entry.Node, epoch, 1)
		return 0, syscall.ESTALE
	}
	fs.nodes.rebind(n, resp.Entry.Node, epoch)
	return resp.Entry.Node, nil
}

// nodeUp resolves a kernel nodeid to its node and host id.
func (fs *FS) nodeUp(ctx context.Context, id, epoch uint64) (*node, uint64, error) {
	n := fs.nodes.get(id)
	if n == nil {
		return nil, 0, syscall.ESTALE
	}
	up, err := fs.upIDFor(ctx, n, epoch)
	return n, up, err
}

// Stats are the guest's counters.
type Stats struct {
	Upstream  upstream.Snapshot
	Nodes     int
	Handles   int
	Cache     CacheStats
	Events    EventStats
	Writeback WritebackStats
	Kernel    []KernelOp // FUSE requests by opcode
	// URing: the mount is served over FUSE over io_uring
	// (MountOptions.URing), and RingRequests of the requests came so;
	// HandOffs times a request took long enough for another thread to
	// take its queue over. Else URingOff says why not, if known.
	URing        bool
	RingRequests uint64
	HandOffs     uint64
	URingOff     string
	Overlays     []OverlayStats `json:",omitempty"` // delegated subtrees served by overlays
	// OverlaysOff says why delegated registrations are served by FUSE,
	// not overlays: why no overlay can be mounted at all (Options.Overlays
	// off, no state directory, a host without FeatTreeWB, no overlayfs
	// or no right to mount it), or else the last registration that fell
	// back, and why. Empty: every delegated registration is an overlay.
	OverlaysOff string `json:",omitempty"`
	// Cached is the cached mode's own connection (a Guest's), once it
	// exists.
	Cached *Stats `json:",omitempty"`
}

func (fs *FS) Stats() Stats {
	st := Stats{Upstream: fs.up.Stats.Snapshot(), Nodes: fs.nodes.len(), Handles: fs.handles.len(),
		Cache: fs.cache.Stats(), Events: fs.evStats.snapshot(), Kernel: fs.kops.snapshot(),
		URing: fs.rings != nil, RingRequests: fs.RingRequests(), HandOffs: fs.ringHandOffs(), URingOff: fs.uringOff,
		Overlays: fs.overlayStats(), OverlaysOff: fs.overlaysOff()}
	if fs.wb != nil {
		st.Writeback = fs.wb.snapshot()
	}
	return st
}

// Destroy stops background work.
func (fs *FS) OnUnmount() { fs.stopOnce.Do(fs.stop) }

// WaitStopped waits up to d for the FS's background work to stop, after
// its unmount (go-fuse calls OnUnmount after Unmount returns): then its
// write-back journal is closed and its state directory free for another
// daemon. It reports whether it stopped.
func (fs *FS) WaitStopped(d time.Duration) bool {
	select {
	case <-fs.stopped:
		return true
	case <-time.After(d):
		return false
	}
}

func (fs *FS) stop() {
	defer close(fs.stopped)
	fs.forgets.close()
	fs.expirer.close()
	if fs.set.remove(fs) == 0 {
		fs.opts.Client.HandleEvents(nil, nil)
	}
	if fs.act != nil {
		close(fs.actStop)
		<-fs.actDone
		fs.act.Close()
	}
	if fs.wb != nil {
		fs.wb.close()
	}
}

// unpin drops a cached name's hold on n, forgetting it upstream when
// nothing holds it any more.
func (fs *FS) unpin(n *node) {
	fs.forgets.add(fs.nodes.unpin(n))
}

package upstream

import (
	"errors"
	"net"
	"time"

	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream/hostfs"
)

// ServerOptions configure a host export server. The zero value of each
// field is a working default.
type ServerOptions struct {
	// Export is the directory to export. Required.
	Export string
	// ReadOnly refuses every change with EROFS.
	ReadOnly bool
	// MaxFDs bounds the fds the server keeps open for nodes and open
	// files. Zero: half the soft RLIMIT_NOFILE, at least 16.
	MaxFDs int
	// SessionGrace is how long a session's nodes and open files outlive
	// a dropped connection, waiting for the guest to resume. Zero: 5m.
	SessionGrace time.Duration
	// OwnerXattrs keeps ownership set by the guest in an xattr on the host
	// file instead of chown. Nil: on when the server is not root.
	OwnerXattrs *bool
	// Backend is how nodes are identified (hostfs.Kind). Zero:
	// hostfs.Auto, $CACHEFS_BACKEND if set, else file handles where
	// the export and the process allow, else portable.
	Backend hostfs.Kind
	// NoFileHandles disables name_to_handle_at inode identity: Backend
	// hostfs.Portable.
	NoFileHandles bool
	// Watcher is how watched subtrees are watched for events (OpWatch).
	// Zero: invalidation.Auto, fanotify where the process and the
	// export's filesystem allow it, else inotify.
	Watcher invalidation.Kind
	// Unwatched are host directory trees whose changes no guest needs
	// (invalidation.HubOptions.Unwatched): the guest's state directory
	// when host and guest run in one process. Nil: none.
	Unwatched []string
	// Secret, when set, is the shared secret every guest must prove it
	// holds at the handshake (auth.go), as the server proves it to the
	// guest. Nil: no authentication, for transports that only trusted
	// peers reach.
	Secret []byte
	// AllowSetID applies the set-user-id and set-group-id bits a guest
	// gives a regular file to the host file. False: they are kept in the
	// file's user.cachefs.setid xattr instead and reported in its
	// attributes, so the guest sees them but no host program runs with
	// them (a root server would otherwise take a guest's set-uid-root
	// file for its own).
	AllowSetID bool
	// AllowDevices makes the device nodes guests make (Mknod, WBMknod of
	// S_IFCHR or S_IFBLK) real device nodes on the host, which needs the
	// server to run as root. False: each is a placeholder file
	// (server_dev.go), which no host program can open as the device.
	AllowDevices bool
	// WithheldFeatures are not offered at the handshake (their ops are
	// still served): to test guests against an older host.
	WithheldFeatures uint64
	// Logf logs unexpected errors. Nil: log.Printf.
	Logf func(format string, args ...any)
}

// Stats are counters of the server.
type ServerStats struct {
	Requests  uint64
	Replayed  uint64 // repeated requests answered with their first reply (replay.go)
	Sessions  int
	Nodes     int
	CachedFDs int
	OpenedFDs uint64
	Evictions uint64
	Watch     invalidation.Stats // the host watcher chosen and its counters
	Backend   hostfs.Kind        // the node identity chosen: Handles or Portable
	CaseFold  bool               // the export folds case (FeatCaseFold)
}

// AcceptLoop serves each connection l accepts on a goroutine of its own
// until l is closed (then it returns nil) or fails.
func AcceptLoop(l net.Listener, serve func(net.Conn)) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go serve(c)
	}
}

// Package upstream is the link between a guest and the host: the wire
// protocol, the guest's client, the host's export server and the
// transports between them. docs/protocol.md is the specification.
//
// # Protocol
//
// proto.go holds every message, op id and limit, and no logic.
// ops_table.go holds one row per op of what is known about it: its
// name, its request and reply messages, whether it is idempotent (may be
// repeated to a host without FeatReplay), pure (the replay cache keeps
// no reply for it), cancellable, repeated even after its caller gave up,
// answered by the server's reader at once, and the feature that gates
// it. The server's dispatch is checked against it at start, and the
// replay cache, the client's retry rules, cancellation and the stats
// names read it; adding an op is a row there, its messages and its
// handler (server_ops.go). Frames
// (frame.go) are a length, a Header and a payload that codec.go encodes
// field by field. A connection carries many requests at once; each reply
// names its request's id and replies come in completion order. Host
// events travel on the same connection in frames of their own kind: the
// client's reader queues them for a goroutine of their own, so an event
// handler that blocks never delays a reply. A malformed, oversized or
// unknown frame is a ProtocolError: the receiver answers with a
// KindError frame carrying its text and closes that connection only.
//
// Every connection opens with a two-request handshake (OpHello, then
// OpAuth) in which, when the server holds a shared secret, each side
// proves it holds it too by an HMAC over both sides' nonces (auth.go);
// the server attaches no session before the guest's proof checks. The
// handshake also settles the features both sides use (Feat*): a client
// sends an op that needs one (OpReadNode: a read by node, without a
// handle; its gate in the ops table) only if the host offered it in this
// session (Client.Offers); Call fails with ENOSYS otherwise.
//
// # Errors
//
// Errors cross the wire as errno values. Server handlers return
// syscall.Errno where they can; anything else is logged and sent as EIO,
// and a handler panic is recovered and sent as EREMOTEIO. The client
// returns the host's Errno as it is, and maps failures of the link to
// EIO, ETIMEDOUT or ErrSessionLost. A request waits for a lost
// connection to come back up to ClientOptions.Reconnect and for a reply
// up to Timeout (negative: no bound, a hard mount); a host silent for
// Reconnect is pinged, and one that does not answer the ping within
// another Reconnect fails the request with EIO (the server answers
// pings on its reader, at once). A request stops waiting with EINTR
// when its context ends. CallIn fails with ErrSessionLost a
// request whose ids belong to a session other than the one it would be
// sent in.
//
// # Host server
//
// The server never builds an absolute host path and never holds an fd
// per known inode. A node is identified by file handle
// (name_to_handle_at) where the export's filesystem and the process
// allow, else by (dev, ino) reached again through its parent's fd and
// its name: the portable identity, macOS's, which
// ServerOptions.Backend, $CACHEFS_BACKEND or `serve --backend portable`
// select on Linux too. What differs between host platforms (identity,
// resolution, xattrs, the errno map) is package hostfs's. O_PATH fds
// are opened on demand and kept in one bounded LRU
// (fdcache.go), together with the fds of open files and directories,
// which are reopened with their flags when evicted. Every name a guest
// sends is a single path component resolved with openat beneath a
// directory fd of the export, and symlinks are never followed, so no
// request reaches outside the export. The process umask is cleared: the
// guest kernel applied the caller's already. Some of what a guest asks
// is filtered whatever the server's privileges (device nodes, rename
// whiteouts, security.* and trusted.* xattrs), and the set-id bits it
// gives a regular file are kept in an xattr rather than applied
// (server_setid.go).
//
// The server is built for Linux only (server*.go, nodes.go, fdcache.go,
// session.go, lockwait.go carry //go:build linux): on macOS NewServer
// returns ErrNoHostBackend until hostfs has macOS's resolve and xattr
// halves and the server's remaining Linux calls (renameat2, OFD locks,
// fallocate, the lock-wait signal) have theirs (docs/macos.md).
// server_api.go holds what both share: ServerOptions and ServerStats.
//
// # Sessions
//
// A session (session.go) holds a guest's node ids and open files and
// outlives its connection for ServerOptions.SessionGrace, so a guest
// that reconnects resumes with the same ids and open files. A guest
// whose session is gone starts a new one; its client bumps its epoch and
// the guest re-resolves node ids by name and reopens its files.
//
// # Blocking locks
//
// A blocking lock request (OpSetlk with Wait) waits on the host until
// the lock is granted. When the guest's caller is interrupted, the
// client cancels it (OpCancel, FeatCancel) and waits for its reply,
// which is EINTR once the host's wait has ended, or success if the lock
// was granted first: the caller is told what the host did, so no lock
// is left on the host for a caller told it failed (server_cancel.go).
// The host waits for a lock it found held on an OS thread of its own and
// ends a cancelled wait by signalling that thread with lockSignal, whose
// handler (the Go runtime's) it makes interrupt system calls rather than
// restart them: a process-wide setting of one real-time signal
// (lockwait.go).
//
// # Events and write-back
//
// server_watch.go watches the subtrees a guest asked for (see package
// invalidation) and pushes changes, minus those the guest itself just
// made. server_apply.go applies a delegated subtree's write-back: path
// based, idempotent, in order within a request.
//
// # Locking
//
// Lock order: session.mu, then nodeTable.mu, then fdCache.mu; the
// connection's write mutex, waits.mu and a kicker's mu are taken alone.
// No lock is held across a syscall that may block except closing fds.
package upstream

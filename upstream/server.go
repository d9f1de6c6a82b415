//go:build linux

package upstream

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// Server exports a directory to guests.
type Server struct {
	opts       ServerOptions // immutable after NewServer
	rootFD     int           // immutable: fd of the export root (O_RDONLY); NewServer only
	rootRef    *fdRef        // immutable: rootFD, released by Close
	rootStat   unix.Stat_t   // immutable
	ownerXattr bool          // immutable
	rootPath   string        // immutable: the export's path, as /proc shows it
	fds        *fdCache
	ident      hostfs.Identity // immutable: file handles or portable (hostfs)
	caseFold   bool            // immutable: the export root folds case (FeatCaseFold)
	requests   atomic.Uint64
	replayed   atomic.Uint64     // repeated requests answered from a session's replay cache
	setidCalls atomic.Uint64     // setxattr and removexattr calls on setidXattr (server_setid.go)
	watchers   *invalidation.Hub // immutable: hands sessions their watchers

	mu       sync.Mutex // protects sessions and conns
	sessions map[uint64]*session
	conns    map[*serverConn]bool
	closed   bool
}

// NewServer opens the export root and returns a server for it. It sets
// the process umask to 0: the guest kernel has applied the caller's
// umask already and it must not be applied twice.
func NewServer(opts ServerOptions) (*Server, error) {
	// Not O_PATH: open_by_handle_at wants a real fd of the mount.
	fd, err := unix.Open(opts.Export, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", opts.Export, err)
	}
	s := &Server{opts: opts, rootFD: fd, sessions: map[uint64]*session{}, conns: map[*serverConn]bool{}}
	if err := unix.Fstat(fd, &s.rootStat); err != nil {
		unix.Close(fd)
		return nil, err
	}
	buf := make([]byte, unix.PathMax)
	if n, err := unix.Readlink(hostfs.FDPath(fd), buf); err == nil {
		s.rootPath = string(buf[:n])
	}
	s.rootRef = &fdRef{fd: fd}
	s.rootRef.refs.Store(1)
	s.ownerXattr = os.Geteuid() != 0
	if opts.OwnerXattrs != nil {
		s.ownerXattr = *opts.OwnerXattrs
	}
	if s.opts.Logf == nil {
		s.opts.Logf = log.Printf
	}
	if s.opts.SessionGrace == 0 {
		s.opts.SessionGrace = 5 * time.Minute
	}
	s.fds = newFDCache(maxFDs(opts.MaxFDs))
	backend := opts.Backend
	if opts.NoFileHandles {
		backend = hostfs.Portable
	}
	s.caseFold = hostfs.CaseFold(fd)
	if s.ident, err = hostfs.NewIdentity(backend, fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if s.watchers, err = invalidation.NewHub(invalidation.HubOptions{Kind: opts.Watcher, MountFD: fd, Unwatched: opts.Unwatched}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watcher: %w", err)
	}
	syscall.Umask(0)
	return s, nil
}

func maxFDs(n int) int {
	if n > 0 {
		return n
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		n = int(rl.Cur / 2)
	}
	return max(n, 16)
}

// Serve accepts connections on l until l is closed or the server is.
func (s *Server) Serve(l net.Listener) error {
	return AcceptLoop(l, s.ServeConn)
}

// ServeConn serves one guest connection until it closes.
func (s *Server) ServeConn(c net.Conn) {
	sc := &serverConn{srv: s, conn: c, fr: newFrameReader(c, MaxFrame)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return
	}
	s.conns[sc] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
	}()
	sc.serve()
}

// Close closes every connection and session and the export root (once
// no request still running uses it).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := s.conns
	s.conns = map[*serverConn]bool{}
	sessions := s.sessions
	s.sessions = map[uint64]*session{}
	s.mu.Unlock()
	for sc := range conns {
		sc.conn.Close()
	}
	for _, ss := range sessions {
		ss.close()
	}
	s.watchers.Close()
	s.rootRef.release()
	return nil
}

func (s *Server) Stats() ServerStats {
	st := ServerStats{Requests: s.requests.Load(), Replayed: s.replayed.Load(), CachedFDs: s.fds.len(),
		OpenedFDs: s.fds.opened.Load(), Evictions: s.fds.evicted.Load(), Watch: s.watchers.Stats(), Backend: s.ident.Kind(), CaseFold: s.caseFold}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Sessions = len(s.sessions)
	for _, ss := range s.sessions {
		st.Nodes += ss.nodes.len()
	}
	return st
}

// attach returns the session to use for a hello: the one it resumes if
// that still exists, else a new one.
func (s *Server) attach(req *HelloReq) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessions[req.Session]; ss != nil && req.Session != 0 {
		ss.attached()
		return ss, true
	}
	id := randomID()
	ss := newSession(s, id)
	s.sessions[id] = ss
	return ss, false
}

// detached starts the grace period of a session whose connection sc
// ended, unless the session has moved on to another connection.
func (s *Server) detached(ss *session, sc *serverConn) {
	gen, ok := ss.detached(sc)
	if !ok {
		return
	}
	time.AfterFunc(s.opts.SessionGrace, func() {
		if !ss.expired(gen) {
			return
		}
		s.mu.Lock()
		if s.sessions[ss.id] == ss {
			delete(s.sessions, ss.id)
		}
		s.mu.Unlock()
		ss.close()
	})
}

var _ io.Closer = (*Server)(nil)

// randomID returns an unguessable nonzero session id: presenting it is
// what resumes a session.
func randomID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

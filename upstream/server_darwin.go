package upstream

import (
	"errors"
	"net"
)

// ErrNoHostBackend is what NewServer returns where no host filesystem
// backend is built yet: the server's file handling is written against
// Linux (O_PATH fds, /proc/self/fd, file handles, renameat2, OFD locks),
// and the portable backend that macOS needs is issue 18's next step.
var ErrNoHostBackend = errors.New("the host server has no macOS backend yet (issue 18): serve runs on Linux")

// Server is a host export server; on macOS it cannot be made yet.
type Server struct{}

// NewServer returns ErrNoHostBackend.
func NewServer(opts ServerOptions) (*Server, error) { return nil, ErrNoHostBackend }

// Serve returns ErrNoHostBackend.
func (s *Server) Serve(l net.Listener) error { return ErrNoHostBackend }

// ServeConn closes c.
func (s *Server) ServeConn(c net.Conn) { c.Close() }

// Close does nothing.
func (s *Server) Close() error { return nil }

// Stats returns zero counters.
func (s *Server) Stats() ServerStats { return ServerStats{} }

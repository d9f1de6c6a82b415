package upstream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mdlayher/vsock"
	"golang.org/x/sys/unix"
)

// Address forms accepted by Listen and Dial:
//
//	unix:///path          a unix socket (created mode 0600)
//	tcp://HOST:PORT       TCP; HOST defaults to loopback when empty
//	vsock://CID:PORT      AF_VSOCK; Listen ignores CID
//	hvsock:///path:PORT   hybrid vsock of Firecracker and Cloud Hypervisor:
//	                      Dial connects to the unix socket /path and sends
//	                      "CONNECT PORT\n"; Listen accepts guest-initiated
//	                      connections on /path_PORT.

// Addr is a parsed transport address.
type Addr struct {
	Scheme string // unix, tcp, vsock or hvsock
	Path   string // unix and hvsock socket path
	Host   string // tcp host
	CID    uint32 // vsock
	Port   uint32 // tcp, vsock and hvsock
}

// ParseAddr parses one of the address forms above.
func ParseAddr(s string) (Addr, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Addr{}, fmt.Errorf("address %q: %w", s, err)
	}
	a := Addr{Scheme: u.Scheme}
	switch u.Scheme {
	case "unix":
		a.Path = u.Path
		if a.Path == "" {
			return Addr{}, fmt.Errorf("address %q: empty socket path", s)
		}
		return a, nil
	case "tcp":
		a.Host = u.Hostname()
		a.Port, err = parsePort(u.Port())
		if a.Host == "" {
			a.Host = "127.0.0.1"
		}
	case "vsock":
		a.Port, err = parsePort(u.Port())
		if err == nil {
			var cid uint64
			cid, err = strconv.ParseUint(u.Hostname(), 10, 32)
			a.CID = uint32(cid)
		}
	case "hvsock":
		i := strings.LastIndexByte(u.Path, ':')
		if i < 1 {
			return Addr{}, fmt.Errorf("address %q: want hvsock:///path:PORT", s)
		}
		a.Path = u.Path[:i]
		a.Port, err = parsePort(u.Path[i+1:])
	default:
		return Addr{}, fmt.Errorf("address %q: unknown scheme (want unix, tcp, vsock or hvsock)", s)
	}
	if err != nil {
		return Addr{}, fmt.Errorf("address %q: %w", s, err)
	}
	return a, nil
}

func parsePort(s string) (uint32, error) {
	p, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return uint32(p), nil
}

// Listen listens on addr.
func Listen(addr string) (net.Listener, error) {
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	switch a.Scheme {
	case "unix":
		return listenUnix(a.Path)
	case "hvsock":
		return listenUnix(fmt.Sprintf("%s_%d", a.Path, a.Port))
	case "tcp":
		return net.Listen("tcp", net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port))))
	default:
		return vsock.Listen(a.Port, nil)
	}
}

// listenUnix creates a unix socket that only its owner may connect to.
// A socket a live process accepts on is refused, so that a second daemon
// cannot cut the first off; a stale one, which nothing accepts on any
// more, is replaced. The socket's directory is locked meanwhile, so that
// two daemons starting at once do not both replace it.
func listenUnix(path string) (net.Listener, error) {
	unlock, err := lockDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := removeStale(path); err != nil {
		return nil, err
	}
	old := syscall.Umask(0177) // no window in which others may connect
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// removeStale removes the socket at path if nothing accepts on it, and
// fails if something does or path is not a socket.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		c.Close()
		return fmt.Errorf("socket %s is in use by a running process (another cachefsd?)", path)
	case errors.Is(err, syscall.ECONNREFUSED):
		return os.Remove(path) // its daemon is gone
	case errors.Is(err, syscall.ENOENT):
		return nil
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("socket %s is in use by a running process (busy: %v)", path, err)
	}
	return fmt.Errorf("socket %s: %w (not replaced)", path, err)
}

// lockDir takes an exclusive flock on directory dir until unlock.
func lockDir(dir string) (unlock func(), err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket directory %s: %w", dir, err)
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() { unix.Close(fd) }, nil
}

// Dial connects to addr.
func Dial(ctx context.Context, addr string) (net.Conn, error) {
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	switch a.Scheme {
	case "unix":
		return d.DialContext(ctx, "unix", a.Path)
	case "tcp":
		return d.DialContext(ctx, "tcp", net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port))))
	case "hvsock":
		return dialHybrid(ctx, a.Path, a.Port)
	default:
		return vsock.Dial(a.CID, a.Port, nil)
	}
}

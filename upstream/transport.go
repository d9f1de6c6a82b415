package upstream

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/mdlayher/vsock"
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
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path) // stale socket from an earlier run
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

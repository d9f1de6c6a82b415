//go:build linux

package upstream_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// listenRaw accepts connections on a new unix socket and hands each to
// serve; it returns the socket's address.
func listenRaw(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go upstream.AcceptLoop(l, serve)
	return "unix://" + path
}

// connectErr returns NewClient's error against addr within timeout.
func connectErr(t *testing.T, addr string, timeout time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := upstream.NewClient(ctx, upstream.ClientOptions{Addr: addr, Logf: testLogf(t)})
	if err == nil {
		c.Close()
		t.Fatalf("NewClient(%s) succeeded, want an error", addr)
	}
	return err
}

// A listener that never answers the handshake: the error names the
// address and says nothing answered.
func TestHandshakeNoAnswer(t *testing.T) {
	held := make(chan net.Conn, 1)
	addr := listenRaw(t, func(c net.Conn) { held <- c })
	err := connectErr(t, addr, 200*time.Millisecond)
	if s := err.Error(); !strings.Contains(s, addr) || !strings.Contains(s, "no answer") {
		t.Errorf("NewClient against a silent listener: %q, want the address and \"no answer\"", s)
	}
	(<-held).Close()
}

// A listener of another protocol (an HTTP server's answer): the error
// says it is not a cachefs server and what it sent.
func TestHandshakeNotCachefs(t *testing.T) {
	addr := listenRaw(t, func(c net.Conn) {
		c.Read(make([]byte, 4096)) // the request
		c.Write([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"))
		c.Close()
	})
	err := connectErr(t, addr, callTimeout)
	if s := err.Error(); !strings.Contains(s, addr) || !strings.Contains(s, "not a cachefs server") || !strings.Contains(s, `"HTTP`) {
		t.Errorf("NewClient against an HTTP answer: %q, want the address, \"not a cachefs server\" and what it sent", s)
	}
}

// A cachefs server's refusal is reported as its own, not as another
// protocol's.
func TestHandshakeHostErrorIsCachefs(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{Secret: []byte("0123456789abcdef0123456789abcdef")})
	err := connectErr(t, ts.addr, callTimeout)
	if strings.Contains(err.Error(), "not a cachefs server") {
		t.Errorf("NewClient without the host's secret: %q, want the host's refusal", err)
	}
}

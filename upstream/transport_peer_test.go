package upstream_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/cachefs/cachefs/upstream"
	"github.com/mdlayher/vsock"
)

func TestCheckPeerCID(t *testing.T) {
	allowed := []uint32{3, 42}
	tests := []struct {
		addr net.Addr
		want string // "" for allowed, else part of the reason
	}{
		{&vsock.Addr{ContextID: 3, Port: 1234}, ""},
		{&vsock.Addr{ContextID: 42, Port: 5}, ""},
		{&vsock.Addr{ContextID: 4, Port: 1234}, "CID 4 is not among"},
		{&vsock.Addr{ContextID: 2}, "CID 2"},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, "not a vsock peer"},
		{&net.UnixAddr{Name: "@", Net: "unix"}, "not a vsock peer"},
		{nil, "not a vsock peer"},
	}
	for _, tt := range tests {
		err := upstream.CheckPeerCID(tt.addr, allowed)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckPeerCID(%v): got %v, want %q", tt.addr, err, tt.want)
		}
	}
	if err := upstream.CheckPeerCID(&vsock.Addr{ContextID: 3}, nil); err == nil {
		t.Errorf("CheckPeerCID with no CIDs allowed: got nil")
	}
}

// fakeConn is a connection from a vsock peer; only closing is real.
type fakeConn struct {
	net.Conn // nil: other methods panic
	cid      uint32
	mu       sync.Mutex
	closed   bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return &vsock.Addr{ContextID: c.cid, Port: 1024} }

func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func (c *fakeConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// fakeListener hands out conns, then fails with net.ErrClosed.
type fakeListener struct {
	net.Listener // nil: other methods panic
	conns        []*fakeConn
}

func (l *fakeListener) Accept() (net.Conn, error) {
	if len(l.conns) == 0 {
		return nil, net.ErrClosed
	}
	c := l.conns[0]
	l.conns = l.conns[1:]
	return c, nil
}

// TestAllowCIDs accepts only the allowed peers: the others are closed
// with a logged reason and never returned.
func TestAllowCIDs(t *testing.T) {
	conns := []*fakeConn{{cid: 5}, {cid: 3}, {cid: 6}, {cid: 7}, {cid: 4}}
	var logged []string
	l := upstream.AllowCIDs(&fakeListener{conns: append([]*fakeConn(nil), conns...)}, []uint32{3, 4},
		func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) })
	var got []uint32
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Accept: %v", err)
			}
			break
		}
		got = append(got, c.(*fakeConn).cid)
	}
	if len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Errorf("accepted CIDs %v, want [3 4]", got)
	}
	for _, c := range conns {
		if want := c.cid != 3 && c.cid != 4; c.isClosed() != want {
			t.Errorf("CID %d: closed %v, want %v", c.cid, c.isClosed(), want)
		}
	}
	if want := "CID 5 is not among the allowed [3 4]"; len(logged) != 3 || !strings.Contains(logged[0], want) {
		t.Errorf("logged %q, want 3 refusals, the first mentioning %q", logged, want)
	}
}

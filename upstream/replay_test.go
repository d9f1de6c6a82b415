//go:build linux

package upstream_test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cachefs/cachefs/upstream"
)

// lossyProxy forwards unix connections to a server; once armed, it cuts
// the connection at the next bytes from the server instead of passing
// them on: the request was run, its reply is lost.
type lossyProxy struct {
	addr  string
	armed atomic.Bool
}

func newLossyProxy(t *testing.T, backend string) *lossyProxy {
	p := &lossyProxy{}
	path := sockPath(t)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p.addr = "unix://" + path
	go func() {
		for {
			guest, err := l.Accept()
			if err != nil {
				return
			}
			host, err := net.Dial("unix", strings.TrimPrefix(backend, "unix://"))
			if err != nil {
				guest.Close()
				continue
			}
			go func() { io.Copy(host, guest); host.Close() }()
			go p.back(guest, host)
		}
	}()
	return p
}

func (p *lossyProxy) back(guest, host net.Conn) {
	defer guest.Close()
	defer host.Close()
	buf := make([]byte, 1<<16)
	for {
		n, err := host.Read(buf)
		if n > 0 && p.armed.CompareAndSwap(true, false) {
			return
		}
		if n > 0 {
			if _, err := guest.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A request whose reply is lost with the connection is sent again after
// the reconnect and answered with its first run's reply: a mkdir does not
// fail with EEXIST, an append is not written twice.
func TestRepeatAfterLostReplyRunsOnce(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	p := newLossyProxy(t, ts.addr)
	c := newClient(t, p.addr, upstream.ClientOptions{})
	if c.Hello().Features&upstream.FeatReplay == 0 {
		t.Fatalf("the server does not offer FeatReplay")
	}
	p.armed.Store(true)
	d := mkdir(t, c, upstream.RootID, "d") // fails the test on EEXIST
	if d.Node == 0 {
		t.Fatalf("mkdir after a lost reply: no node")
	}
	e, h := create(t, c, d.Node, "log")
	release(t, c, h)
	ah := open(t, c, e.Node, syscall.O_WRONLY|syscall.O_APPEND)
	p.armed.Store(true)
	write(t, c, ah, 0, []byte("once\n"))
	got, err := os.ReadFile(filepath.Join(ts.export, "d", "log"))
	if err != nil || string(got) != "once\n" {
		t.Errorf("appended file holds %q (%v), want the line once", got, err)
	}
	if n := ts.srv.Stats().Replayed; n != 2 {
		t.Errorf("Replayed: %d, want 2 (the mkdir and the write)", n)
	}
	if !c.Hello().Resumed {
		t.Errorf("the client did not resume its session")
	}
}

func release(t testing.TB, c *upstream.Client, h uint64) {
	t.Helper()
	must(t, c, upstream.OpRelease, &upstream.HandleReq{Handle: h}, &upstream.Empty{})
}

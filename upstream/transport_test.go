//go:build linux

package upstream_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

func TestParseAddr(t *testing.T) {
	tests := []struct {
		in   string
		want upstream.Addr
		err  bool
	}{
		{in: "unix:///run/cachefs.sock", want: upstream.Addr{Scheme: "unix", Path: "/run/cachefs.sock"}},
		{in: "tcp://10.0.0.1:7000", want: upstream.Addr{Scheme: "tcp", Host: "10.0.0.1", Port: 7000}},
		{in: "tcp://:7000", want: upstream.Addr{Scheme: "tcp", Host: "127.0.0.1", Port: 7000}},
		{in: "tcp://[::1]:7000", want: upstream.Addr{Scheme: "tcp", Host: "::1", Port: 7000}},
		{in: "vsock://2:5000", want: upstream.Addr{Scheme: "vsock", CID: 2, Port: 5000}},
		{in: "hvsock:///run/vm.vsock:1234", want: upstream.Addr{Scheme: "hvsock", Path: "/run/vm.vsock", Port: 1234}},
		{in: "hvsock:///a:b/v.sock:9", want: upstream.Addr{Scheme: "hvsock", Path: "/a:b/v.sock", Port: 9}},
		{in: "unix://", err: true},
		{in: "tcp://host", err: true},
		{in: "tcp://host:port", err: true},
		{in: "tcp://host:99999999999", err: true},
		{in: "vsock://x:5000", err: true},
		{in: "vsock://2", err: true},
		{in: "hvsock:///run/vm.vsock", err: true},
		{in: "hvsock:///run/vm.vsock:", err: true},
		{in: "ftp://host:1", err: true},
		{in: "/run/cachefs.sock", err: true},
		{in: "%zz", err: true},
	}
	for _, tt := range tests {
		got, err := upstream.ParseAddr(tt.in)
		if tt.err {
			if err == nil {
				t.Errorf("ParseAddr(%q) = %+v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseAddr(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestTCP(t *testing.T) {
	l, err := upstream.Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	srv, err := upstream.NewServer(upstream.ServerOptions{Export: t.TempDir(), Logf: testLogf(t)})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	go srv.Serve(l)
	defer srv.Close()
	defer l.Close()
	c := newClient(t, "tcp://"+l.Addr().String(), upstream.ClientOptions{})
	must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
}

func TestUnixSocketMode(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	st, err := os.Stat(strings.TrimPrefix(ts.addr, "unix://"))
	if err != nil || st.Mode().Perm() != 0600 || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v %v, want a socket of mode 0600", st.Mode(), err)
	}
}

// hypervisor fakes the unix socket of Firecracker or Cloud Hypervisor:
// it reads "CONNECT port", answers with answer and, if that is "OK ...",
// proxies the connection to the server at backend.
func hypervisor(t *testing.T, answer, backend string) (path string, ports chan uint32) {
	path = sockPath(t)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ports = make(chan uint32, 10)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				proxyHybrid(conn, answer, backend, ports)
			}()
		}
	}()
	return path, ports
}

func proxyHybrid(conn net.Conn, answer, backend string, ports chan uint32) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	port, perr := strconv.ParseUint(strings.TrimPrefix(strings.TrimSuffix(line, "\n"), "CONNECT "), 10, 32)
	if err != nil || perr != nil {
		return
	}
	ports <- uint32(port)
	io.WriteString(conn, answer)
	if !strings.HasPrefix(answer, "OK ") {
		return
	}
	up, err := net.Dial("unix", strings.TrimPrefix(backend, "unix://"))
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		io.Copy(up, br) // bytes the reader took past the line, then the rest
		up.(*net.UnixConn).CloseWrite()
	}()
	io.Copy(conn, up)
}

func TestHybridVsock(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	path, ports := hypervisor(t, "OK 1073741824\n", ts.addr)
	c := newClient(t, "hvsock://"+path+":1234", upstream.ClientOptions{})
	if p := <-ports; p != 1234 {
		t.Errorf("hypervisor was asked for port %d, want 1234", p)
	}
	create(t, c, upstream.RootID, "f")
	lookup(t, c, upstream.RootID, "f")
	c.Drop() // reconnects through the hypervisor again
	lookup(t, c, upstream.RootID, "f")
}

func TestHybridVsockRefused(t *testing.T) {
	path, _ := hypervisor(t, "ERR no listener\n", "")
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if conn, err := upstream.Dial(ctx, "hvsock://"+path+":1234"); err == nil {
		conn.Close()
		t.Fatalf("Dial succeeded against a refusing hypervisor")
	}
}

// TestHybridListen checks that the host side of hybrid vsock listens on
// path_PORT, where the hypervisor forwards guest connections.
func TestHybridListen(t *testing.T) {
	path := sockPath(t)
	startServerAt(t, upstream.ServerOptions{}, "hvsock://"+path+":5000")
	c := newClient(t, "unix://"+path+"_5000", upstream.ClientOptions{})
	must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
}

// TestLinkDelay checks the definition of ClientOptions.LinkDelay: each
// way costs the delay, so a round trip costs at least twice that.
func TestLinkDelay(t *testing.T) {
	const delay = 2 * time.Millisecond
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{LinkDelay: delay})
	for i := 0; i < 5; i++ {
		start := time.Now()
		must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
		if d := time.Since(start); d < 2*delay {
			t.Errorf("round trip took %v, want at least %v", d, 2*delay)
		}
	}
}

// TestDelayConnOrder sends many writes through a DelayConn: all arrive,
// in order, each no sooner than the delay after it was written.
func TestDelayConnOrder(t *testing.T) {
	const delay = time.Millisecond
	a, b := net.Pipe()
	dc := upstream.DelayConn(a, delay)
	defer dc.Close()
	defer b.Close()
	const n = 200
	sent := make(chan time.Time, n)
	go func() {
		for i := 0; i < n; i++ {
			sent <- time.Now()
			dc.Write([]byte{byte(i)})
		}
	}()
	buf := make([]byte, 1)
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(b, buf); err != nil || buf[0] != byte(i) {
			t.Fatalf("message %d: got %d %v", i, buf[0], err)
		}
		if d := time.Since(<-sent); d < delay {
			t.Fatalf("message %d arrived after %v, want at least %v", i, d, delay)
		}
	}
	// And the other way: data from the peer reaches Read after delay.
	go func() {
		sent <- time.Now()
		b.Write([]byte("back"))
	}()
	back := make([]byte, 4)
	if _, err := io.ReadFull(dc, back); err != nil || string(back) != "back" {
		t.Fatalf("Read: %q %v", back, err)
	}
	if d := time.Since(<-sent); d < delay {
		t.Errorf("reply arrived after %v, want at least %v", d, delay)
	}
}

//go:build linux

package upstream_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// callTimeout bounds every call a test makes, so that a request that
// never gets an answer fails the test instead of hanging it.
const callTimeout = 20 * time.Second

// testLogf logs to t until the test ends; late server goroutines are
// silenced rather than panicking the test binary.
func testLogf(t testing.TB) func(string, ...any) {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() {
		mu.Lock()
		done = true
		mu.Unlock()
	})
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Logf(format, args...)
		}
	}
}

// sockPath returns a unix socket path short enough for sun_path, which
// a deep t.TempDir may not be.
func sockPath(t testing.TB) string {
	dir, err := os.MkdirTemp("", "cfs")
	if err != nil {
		t.Fatalf("MkdirTemp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s")
}

// testServer is an in-process server listening on a unix socket.
type testServer struct {
	srv    *upstream.Server
	export string
	addr   string
	l      net.Listener
	done   chan struct{}
}

// startServer serves opts (Export defaults to a new temporary
// directory) on a fresh socket until the test ends.
func startServer(t testing.TB, opts upstream.ServerOptions) *testServer {
	t.Helper()
	return startServerAt(t, opts, "unix://"+sockPath(t))
}

func startServerAt(t testing.TB, opts upstream.ServerOptions, addr string) *testServer {
	t.Helper()
	if opts.Export == "" {
		opts.Export = t.TempDir()
	}
	if opts.Logf == nil {
		opts.Logf = testLogf(t)
	}
	srv, err := upstream.NewServer(opts)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	l, err := upstream.Listen(addr)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ts := &testServer{srv: srv, export: opts.Export, addr: addr, l: l, done: make(chan struct{})}
	go func() {
		srv.Serve(l)
		close(ts.done)
	}()
	t.Cleanup(ts.stop)
	return ts
}

// stop closes the listener and the server; it may be called twice.
func (ts *testServer) stop() {
	ts.l.Close()
	ts.srv.Close()
	<-ts.done
}

// newClient connects to addr until the test ends.
func newClient(t testing.TB, addr string, opts upstream.ClientOptions) *upstream.Client {
	t.Helper()
	opts.Addr = addr
	if opts.Logf == nil {
		opts.Logf = testLogf(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c, err := upstream.NewClient(ctx, opts)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// try makes one call bounded by callTimeout.
func try(c *upstream.Client, op upstream.Op, req, resp any) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return c.Call(ctx, op, req, resp)
}

// must makes one call and fails the test if it fails.
func must(t testing.TB, c *upstream.Client, op upstream.Op, req, resp any) {
	t.Helper()
	if err := try(c, op, req, resp); err != nil {
		t.Fatalf("%v %+v: %v", op, req, err)
	}
}

// wantErrno checks that err is the errno want.
func wantErrno(t testing.TB, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

var rootCaller = upstream.Caller{Uid: 0, Gid: 0, Pid: 1}

func lookup(t testing.TB, c *upstream.Client, parent uint64, name string) upstream.Entry {
	t.Helper()
	var resp upstream.EntryResp
	must(t, c, upstream.OpLookup, &upstream.LookupReq{Parent: parent, Name: name}, &resp)
	return resp.Entry
}

func mkdir(t testing.TB, c *upstream.Client, parent uint64, name string) upstream.Entry {
	t.Helper()
	var resp upstream.EntryResp
	must(t, c, upstream.OpMkdir, &upstream.MknodReq{Parent: parent, Name: name,
		Mode: syscall.S_IFDIR | 0755, Caller: rootCaller}, &resp)
	return resp.Entry
}

// create makes a file read-write and returns its entry and handle.
func create(t testing.TB, c *upstream.Client, parent uint64, name string) (upstream.Entry, uint64) {
	t.Helper()
	var resp upstream.CreateResp
	must(t, c, upstream.OpCreate, &upstream.CreateReq{Parent: parent, Name: name,
		Flags: syscall.O_RDWR, Mode: 0644, Caller: rootCaller}, &resp)
	return resp.Entry, resp.Handle
}

func open(t testing.TB, c *upstream.Client, node uint64, flags uint32) uint64 {
	t.Helper()
	var resp upstream.OpenResp
	must(t, c, upstream.OpOpen, &upstream.OpenReq{Node: node, Flags: flags}, &resp)
	return resp.Handle
}

func write(t testing.TB, c *upstream.Client, h uint64, off int64, data []byte) {
	t.Helper()
	var resp upstream.WriteResp
	must(t, c, upstream.OpWrite, &upstream.WriteReq{Handle: h, Offset: off, Data: data}, &resp)
	if int(resp.Written) != len(data) {
		t.Fatalf("Write: wrote %d of %d bytes", resp.Written, len(data))
	}
}

func read(t testing.TB, c *upstream.Client, h uint64, off int64, size uint32) []byte {
	t.Helper()
	var resp upstream.DataResp
	must(t, c, upstream.OpRead, &upstream.ReadReq{Handle: h, Offset: off, Size: size}, &resp)
	return resp.Data
}

// Raw frames, built here from the wire format rather than with the
// package's own framing, so the tests also pin the format down.

func rawFrame(kind upstream.Kind, op upstream.Op, id uint64, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(upstream.HeaderSize+len(payload)))
	b = append(b, byte(kind))
	b = binary.LittleEndian.AppendUint16(b, uint16(op))
	b = binary.LittleEndian.AppendUint64(b, id)
	b = binary.LittleEndian.AppendUint32(b, 0)
	return append(b, payload...)
}

func rawRequest(op upstream.Op, id uint64, msg any) []byte {
	return rawFrame(upstream.KindRequest, op, id, upstream.Marshal(nil, msg))
}

func rawHelloFrame() []byte {
	return rawRequest(upstream.OpHello, 1, &upstream.HelloReq{Magic: upstream.Magic,
		Version: upstream.Version, Features: upstream.AllFeatures})
}

// rawAuthFrame is the second request of a handshake without a secret.
func rawAuthFrame() []byte {
	return rawRequest(upstream.OpAuth, 2, &upstream.AuthReq{Nonce: make([]byte, upstream.NonceSize)})
}

// readRawFrame reads one frame; payloads beyond MaxFrame are an error.
func readRawFrame(r io.Reader) (upstream.Header, []byte, error) {
	var hb [4 + upstream.HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return upstream.Header{}, nil, err
	}
	n := binary.LittleEndian.Uint32(hb[:])
	if n < upstream.HeaderSize || n-upstream.HeaderSize > upstream.MaxFrame {
		return upstream.Header{}, nil, errors.New("bad frame length")
	}
	h := upstream.Header{Kind: upstream.Kind(hb[4]), Op: upstream.Op(binary.LittleEndian.Uint16(hb[5:])),
		ID: binary.LittleEndian.Uint64(hb[7:]), Errno: binary.LittleEndian.Uint32(hb[15:])}
	payload := make([]byte, n-upstream.HeaderSize)
	_, err := io.ReadFull(r, payload)
	return h, payload, err
}

// dialRaw connects to a unix address with a deadline on all I/O.
func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("unix", addr[len("unix://"):])
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	conn.SetDeadline(time.Now().Add(callTimeout))
	t.Cleanup(func() { conn.Close() })
	return conn
}

// rawHello shakes hands on conn, without a secret, and returns the
// server's answer.
func rawHello(t testing.TB, conn net.Conn) upstream.HelloResp {
	t.Helper()
	return rawResume(t, conn, 0)
}

// rawResume shakes hands on conn, without a secret, asking to resume
// session (0: a new one).
func rawResume(t testing.TB, conn net.Conn, session uint64) upstream.HelloResp {
	t.Helper()
	hello := rawRequest(upstream.OpHello, 1, &upstream.HelloReq{Magic: upstream.Magic,
		Version: upstream.Version, Features: upstream.AllFeatures, Session: session})
	var ch upstream.ChallengeResp
	rawCall(t, conn, hello, &ch)
	if len(ch.Nonce) != upstream.NonceSize || ch.Secret {
		t.Fatalf("challenge: %+v, want a nonce and no secret", ch)
	}
	var resp upstream.HelloResp
	rawCall(t, conn, rawAuthFrame(), &resp)
	return resp
}

// rawCall writes a request frame and decodes its reply into resp.
func rawCall(t testing.TB, conn net.Conn, frame []byte, resp any) {
	t.Helper()
	if _, err := conn.Write(frame); err != nil {
		t.Fatalf("write: %v", err)
	}
	h, payload, err := readRawFrame(conn)
	if err != nil || h.Kind != upstream.KindReply || h.Errno != 0 {
		t.Fatalf("reply: %+v %v", h, err)
	}
	if err := upstream.Unmarshal(payload, resp); err != nil {
		t.Fatalf("reply: %v", err)
	}
}

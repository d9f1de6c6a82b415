//go:build linux

package upstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// Handshake authentication by shared secret, over real TCP and unix
// sockets.

var (
	secretA = []byte("correct horse battery staple A")
	secretB = []byte("correct horse battery staple B")
)

// logBuffer keeps what a side logs, and passes it to the test log.
type logBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	logf func(string, ...any)
}

func newLogBuffer(t testing.TB) *logBuffer { return &logBuffer{logf: testLogf(t)} }

func (l *logBuffer) Logf(format string, args ...any) {
	l.mu.Lock()
	fmt.Fprintf(&l.buf, format+"\n", args...)
	l.mu.Unlock()
	l.logf(format, args...)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitLog waits until the log holds want.
func waitLog(t *testing.T, l *logBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(callTimeout); !strings.Contains(l.String(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("log %q does not mention %q", l.String(), want)
		}
	}
}

// startTCPServer serves opts on a loopback TCP port.
func startTCPServer(t *testing.T, opts upstream.ServerOptions) *testServer {
	t.Helper()
	ts := startServerAt(t, opts, "tcp://127.0.0.1:0")
	ts.addr = "tcp://" + ts.l.Addr().String()
	return ts
}

// dialFails connects with opts and returns the error NewClient gives.
func dialFails(t *testing.T, addr string, opts upstream.ClientOptions) error {
	t.Helper()
	opts.Addr = addr
	if opts.Logf == nil {
		opts.Logf = testLogf(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c, err := upstream.NewClient(ctx, opts)
	if err == nil {
		c.Close()
		t.Fatalf("NewClient succeeded, want an authentication failure")
	}
	return err
}

// TestAuthTCP connects with the right secret; the session resumes across
// dropped connections, each authenticated again.
func TestAuthTCP(t *testing.T) {
	ts := startTCPServer(t, upstream.ServerOptions{Secret: secretA})
	var dials int
	var mu sync.Mutex
	c := newClient(t, ts.addr, upstream.ClientOptions{Secret: secretA, Dial: func(ctx context.Context) (net.Conn, error) {
		mu.Lock()
		dials++
		mu.Unlock()
		return upstream.Dial(ctx, ts.addr)
	}})
	e, h := create(t, c, upstream.RootID, "f")
	write(t, c, h, 0, []byte("data"))
	session := c.Hello().Session
	for i := 0; i < 3; i++ {
		c.Drop()
		if got := read(t, c, h, 0, 10); string(got) != "data" {
			t.Fatalf("read after drop %d: got %q", i, got)
		}
	}
	must(t, c, upstream.OpGetattr, &upstream.NodeReq{Node: e.Node}, &upstream.AttrResp{})
	if hr := c.Hello(); !hr.Resumed || hr.Session != session || len(hr.Proof) == 0 {
		t.Errorf("Hello after drops: resumed %v, session %x (was %x), proof %d bytes", hr.Resumed, hr.Session, session, len(hr.Proof))
	}
	mu.Lock()
	defer mu.Unlock()
	if dials != 4 {
		t.Errorf("dials: got %d, want 4 (each authenticated)", dials)
	}
}

// TestAuthUnix authenticates over a unix socket too, where the secret is
// optional.
func TestAuthUnix(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{Secret: secretA})
	c := newClient(t, ts.addr, upstream.ClientOptions{Secret: secretA})
	must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
}

// TestAuthFailures tries every mismatch of secrets: both sides fail with
// "authentication failed", and a client already connected carries on.
func TestAuthFailures(t *testing.T) {
	tests := []struct {
		name              string
		host, guest       []byte
		guestWhy, hostWhy string
	}{
		{"wrong secret", secretA, secretB, "the secrets differ", "proof does not match"},
		{"guest has none", secretA, nil, "requires a shared secret", "guest gave up"},
		{"host has none", nil, secretA, "host has no secret", "guest gave up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hostLog := newLogBuffer(t)
			ts := startTCPServer(t, upstream.ServerOptions{Secret: tt.host, Logf: hostLog.Logf})
			good := newClient(t, ts.addr, upstream.ClientOptions{Secret: tt.host})
			err := dialFails(t, ts.addr, upstream.ClientOptions{Secret: tt.guest})
			if !errors.Is(err, upstream.ErrAuth) || !strings.Contains(err.Error(), "authentication failed") ||
				!strings.Contains(err.Error(), tt.guestWhy) {
				t.Errorf("guest: got %v, want ErrAuth: %s", err, tt.guestWhy)
			}
			waitLog(t, hostLog, tt.hostWhy)
			waitLog(t, hostLog, "authentication failed")
			must(t, good, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
			lookupMissing(t, good)
			if got := ts.srv.Stats().Sessions; got != 1 {
				t.Errorf("Sessions: got %d, want 1 (no session for a failed handshake)", got)
			}
		})
	}
}

// TestAuthRawProof sends proofs by hand: a missing or forged one gets
// the error frame "authentication failed" and the connection closes.
func TestAuthRawProof(t *testing.T) {
	hostLog := newLogBuffer(t)
	ts := startServer(t, upstream.ServerOptions{Secret: secretA, Logf: hostLog.Logf})
	for _, proof := range [][]byte{nil, make([]byte, 32), []byte("short")} {
		conn := dialRaw(t, ts.addr)
		var ch upstream.ChallengeResp
		rawCall(t, conn, rawHelloFrame(), &ch)
		if !ch.Secret || len(ch.Nonce) != upstream.NonceSize {
			t.Fatalf("challenge: %+v, want a secret and a nonce", ch)
		}
		auth := &upstream.AuthReq{Nonce: make([]byte, upstream.NonceSize), Proof: proof}
		if _, err := conn.Write(rawRequest(upstream.OpAuth, 2, auth)); err != nil {
			t.Fatalf("Write: %v", err)
		}
		wantProtocolError(t, conn, "authentication failed")
	}
	waitLog(t, hostLog, "sent no proof")
	waitLog(t, hostLog, "proof does not match")
}

// TestAuthImpostorHost is a host that asks for a secret it does not
// hold: the guest refuses its proof and sends no session id.
func TestAuthImpostorHost(t *testing.T) {
	path := sockPath(t)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		h, _, _ := readRawFrame(conn)
		ch := upstream.ChallengeResp{Nonce: make([]byte, upstream.NonceSize), Secret: true}
		conn.Write(rawFrame(upstream.KindReply, upstream.OpHello, h.ID, upstream.Marshal(nil, &ch)))
		h, _, _ = readRawFrame(conn)
		resp := upstream.HelloResp{Version: upstream.Version, Session: 7, Proof: make([]byte, 32)}
		conn.Write(rawFrame(upstream.KindReply, upstream.OpAuth, h.ID, upstream.Marshal(nil, &resp)))
		_, payload, _ := readRawFrame(conn)
		got <- string(payload)
	}()
	err = dialFails(t, "unix://"+path, upstream.ClientOptions{Secret: secretA})
	if !errors.Is(err, upstream.ErrAuth) || !strings.Contains(err.Error(), "does not hold our secret") {
		t.Errorf("NewClient: got %v, want ErrAuth: the host does not hold our secret", err)
	}
	if msg := <-got; !strings.Contains(msg, "authentication failed") {
		t.Errorf("the guest told the host %q", msg)
	}
}

// TestAuthSecretNeverSent records a handshake's bytes: the secret is not
// among them.
func TestAuthSecretNeverSent(t *testing.T) {
	ts := startTCPServer(t, upstream.ServerOptions{Secret: secretA})
	var rec recorder
	c := newClient(t, ts.addr, upstream.ClientOptions{Secret: secretA, Dial: func(ctx context.Context) (net.Conn, error) {
		conn, err := upstream.Dial(ctx, ts.addr)
		return &recordConn{Conn: conn, rec: &rec}, err
	}})
	must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
	if b := rec.bytes(); len(b) == 0 || bytes.Contains(b, secretA) || bytes.Contains(b, secretA[:8]) {
		t.Errorf("the handshake carries the secret (or nothing was recorded: %d bytes)", len(b))
	}
}

type recorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *recorder) add(b []byte) {
	r.mu.Lock()
	r.buf.Write(b)
	r.mu.Unlock()
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.buf.Bytes())
}

// recordConn records both directions of a connection.
type recordConn struct {
	net.Conn
	rec *recorder
}

func (c *recordConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.rec.add(b[:n])
	return n, err
}

func (c *recordConn) Write(b []byte) (int, error) {
	c.rec.add(b)
	return c.Conn.Write(b)
}

// TestAuthReconnectRefused restarts the host with another secret: the
// guest's reconnects fail authentication, and its calls fail, until a
// host with its secret is back.
func TestAuthReconnectRefused(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{Secret: secretA})
	guestLog := newLogBuffer(t)
	c := newClient(t, ts.addr, upstream.ClientOptions{Secret: secretA, Reconnect: 300 * time.Millisecond, Logf: guestLog.Logf})
	ts.stop()
	wrong := startServerAt(t, upstream.ServerOptions{Export: ts.export, Secret: secretB}, ts.addr)
	err := try(c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
	if err == nil {
		t.Fatalf("Ping through a host with another secret succeeded")
	}
	waitLog(t, guestLog, "authentication failed")
	wrong.stop()
	startServerAt(t, upstream.ServerOptions{Export: ts.export, Secret: secretA}, ts.addr)
	for deadline := time.Now().Add(callTimeout); ; {
		err := try(c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ping after the right host is back: %v", err)
		}
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		os.Chmod(p, mode)
		return p
	}
	got, err := upstream.ReadSecret(write("good", "  0123456789abcdef0123\n", 0600))
	if err != nil || string(got) != "0123456789abcdef0123" {
		t.Errorf("ReadSecret good: got %q %v", got, err)
	}
	for _, tt := range []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"readable", "0123456789abcdef0123", 0644, "chmod 600"},
		{"short", "short\n", 0600, "at least"},
		{"empty", "", 0400, "at least"},
		{"huge", strings.Repeat("x", 5000), 0600, "longer"},
	} {
		_, err := upstream.ReadSecret(write(tt.name, tt.content, tt.mode))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ReadSecret %s: got %v, want an error mentioning %q", tt.name, err, tt.want)
		}
	}
	if _, err := upstream.ReadSecret(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("ReadSecret of a missing file succeeded")
	}
}

//go:build linux

package upstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

const chunk = 4096

// pattern is the content of chunk i of a test file.
func pattern(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("chunk %04d|", i)), chunk/11+1)[:chunk]
}

// lockedFile creates a file of n chunks with two handles, the first
// holding a write lock on the whole file.
func lockedFile(t *testing.T, c *upstream.Client, n int) (holder, waiter uint64) {
	t.Helper()
	e, h := create(t, c, upstream.RootID, "locked")
	for i := 0; i < n; i++ {
		write(t, c, h, int64(i*chunk), pattern(i))
	}
	must(t, c, upstream.OpSetlk, &upstream.LockReq{Handle: h, Owner: 1,
		Lock: upstream.Lock{End: ^uint64(0), Type: unix.F_WRLCK}}, &upstream.Empty{})
	return h, open(t, c, e.Node, syscall.O_RDWR)
}

func lockWait(h uint64) *upstream.LockReq {
	return &upstream.LockReq{Handle: h, Owner: 2, Wait: true,
		Lock: upstream.Lock{End: ^uint64(0), Type: unix.F_WRLCK}}
}

func unlock(h uint64) *upstream.LockReq {
	return &upstream.LockReq{Handle: h, Owner: 1, Lock: upstream.Lock{End: ^uint64(0), Type: unix.F_UNLCK}}
}

// waitRequests waits until the server has taken n requests in all.
func waitRequests(t *testing.T, srv *upstream.Server, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(callTimeout); srv.Stats().Requests < n; {
		if time.Now().After(deadline) {
			t.Fatalf("server took %d requests, want %d", srv.Stats().Requests, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPipelining runs 64 concurrent reads while a blocking lock request
// is in flight on the same connection; every read gets its own data.
func TestPipelining(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	holder, waiter := lockedFile(t, c, 64)
	slow := make(chan error, 1)
	base := ts.srv.Stats().Requests
	go func() { slow <- try(c, upstream.OpSetlk, lockWait(waiter), &upstream.Empty{}) }()
	waitRequests(t, ts.srv, base+1)
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp upstream.DataResp
			err := try(c, upstream.OpRead, &upstream.ReadReq{Handle: waiter, Offset: int64(i * chunk), Size: chunk}, &resp)
			if err != nil || !bytes.Equal(resp.Data, pattern(i)) {
				t.Errorf("read chunk %d: got %.20q %v", i, resp.Data, err)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-slow:
		t.Fatalf("blocked lock returned early: %v", err)
	default:
	}
	must(t, c, upstream.OpSetlk, unlock(holder), &upstream.Empty{})
	if err := <-slow; err != nil {
		t.Fatalf("blocked lock: %v", err)
	}
}

// TestRepliesOutOfOrder checks on the wire that replies go out as
// requests complete: a blocked request sent first is answered last.
func TestRepliesOutOfOrder(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	holder, waiter := lockedFile(t, c, 64)
	conn := dialRaw(t, ts.addr)
	if hr := rawResume(t, conn, c.Hello().Session); !hr.Resumed {
		t.Fatalf("resume hello: %+v", hr)
	}
	batch := rawRequest(upstream.OpSetlk, 1000, lockWait(waiter))
	for i := 0; i < 64; i++ {
		batch = append(batch, rawRequest(upstream.OpRead, uint64(i),
			&upstream.ReadReq{Handle: waiter, Offset: int64(i * chunk), Size: chunk})...)
	}
	if _, err := conn.Write(batch); err != nil {
		t.Fatalf("Write: %v", err)
	}
	for range 64 {
		h, payload, err := readRawFrame(conn)
		if err != nil || h.ID >= 64 || h.Errno != 0 {
			t.Fatalf("got reply %+v %v, want a read", h, err)
		}
		var resp upstream.DataResp
		if err := upstream.Unmarshal(payload, &resp); err != nil || !bytes.Equal(resp.Data, pattern(int(h.ID))) {
			t.Errorf("read %d: got %.20q %v", h.ID, resp.Data, err)
		}
	}
	must(t, c, upstream.OpSetlk, unlock(holder), &upstream.Empty{})
	if h, _, err := readRawFrame(conn); err != nil || h.ID != 1000 || h.Errno != 0 {
		t.Fatalf("got %+v %v, want the lock's reply", h, err)
	}
}

// TestDropResumes drops the connection; the client resumes the session
// and the same node ids and open handle keep working.
func TestDropResumes(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	e, h := create(t, c, upstream.RootID, "f")
	write(t, c, h, 0, []byte("before"))
	epoch := c.Epoch()
	for i := 0; i < 3; i++ {
		c.Drop()
		if got := read(t, c, h, 0, 100); string(got) != "before" {
			t.Fatalf("read after drop %d: got %q", i, got)
		}
		must(t, c, upstream.OpGetattr, &upstream.NodeReq{Node: e.Node}, &upstream.AttrResp{})
	}
	if got := c.Epoch(); got != epoch {
		t.Errorf("Epoch: got %d, want %d", got, epoch)
	}
	if !c.Hello().Resumed {
		t.Errorf("Hello().Resumed is false after a drop")
	}
	if got := ts.srv.Stats().Sessions; got != 1 {
		t.Errorf("Sessions: got %d, want 1", got)
	}
}

// TestResumeSurvivesLateDetach drops a connection whose server side ends
// only after the client resumed the session on a new one (a blocked
// request holds it): the session must not expire under the new
// connection once the grace period has passed.
func TestResumeSurvivesLateDetach(t *testing.T) {
	const grace = 100 * time.Millisecond
	ts := startServer(t, upstream.ServerOptions{SessionGrace: grace})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	holder, waiter := lockedFile(t, c, 1)
	slow := make(chan error, 1)
	base := ts.srv.Stats().Requests
	go func() { slow <- try(c, upstream.OpSetlk, lockWait(waiter), &upstream.Empty{}) }()
	waitRequests(t, ts.srv, base+1)
	c.Drop()
	// The request is sent again on the new connection and waits with the
	// first, still blocked on the host: the unlock gives it the lock.
	must(t, c, upstream.OpSetlk, unlock(holder), &upstream.Empty{})
	if err := <-slow; err != nil {
		t.Fatalf("blocked lock across a drop: %v, want the lock once released", err)
	}
	if got := ts.srv.Stats().Replayed; got != 1 {
		t.Errorf("Replayed: %d, want the repeated lock request answered once from its first run", got)
	}
	time.Sleep(4 * grace)
	if got := read(t, c, holder, 0, chunk); !bytes.Equal(got, pattern(0)) {
		t.Fatalf("read after grace: got %.20q", got)
	}
}

// TestServerRestart replaces the server: the client reconnects to a new
// session, bumps its epoch, and old ids fail rather than hang.
func TestServerRestart(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	e, h := create(t, c, upstream.RootID, "f")
	write(t, c, h, 0, []byte("data"))
	epoch := c.Epoch()
	restart(t, c, ts)
	if c.Epoch() == epoch || c.Hello().Resumed {
		t.Errorf("Epoch %d (was %d), resumed %v: want a new session", c.Epoch(), epoch, c.Hello().Resumed)
	}
	err := try(c, upstream.OpGetattr, &upstream.NodeReq{Node: e.Node}, &upstream.AttrResp{})
	if !errors.Is(err, syscall.ESTALE) && !errors.Is(err, upstream.ErrSessionLost) {
		t.Errorf("Getattr of an old node: got %v, want ESTALE or ErrSessionLost", err)
	}
	err = try(c, upstream.OpRead, &upstream.ReadReq{Handle: h, Size: 10}, &upstream.DataResp{})
	if !errors.Is(err, syscall.EBADF) && !errors.Is(err, upstream.ErrSessionLost) {
		t.Errorf("Read of an old handle: got %v, want EBADF or ErrSessionLost", err)
	}
	e2 := lookup(t, c, upstream.RootID, "f")
	if got := read(t, c, open(t, c, e2.Node, syscall.O_RDONLY), 0, 10); string(got) != "data" {
		t.Errorf("read in the new session: got %q", got)
	}
}

// restart replaces ts by a new server of the same export on the same
// socket and waits until c is connected to it.
func restart(t *testing.T, c *upstream.Client, ts *testServer) {
	t.Helper()
	ts.stop()
	startServerAt(t, upstream.ServerOptions{Export: ts.export}, ts.addr)
	for {
		err := try(c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
		if err == nil {
			return
		}
		if !errors.Is(err, upstream.ErrSessionLost) {
			t.Fatalf("Ping: %v", err)
		}
	}
}

func TestOnSessionAfterRestart(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	sessions := make(chan bool, 10)
	c := newClient(t, ts.addr, upstream.ClientOptions{
		OnSession: func(resumed bool, _ upstream.Entry) { sessions <- resumed }})
	c.Drop()
	must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
	if resumed := nextSession(t, sessions); !resumed {
		t.Errorf("OnSession after a drop: resumed is false")
	}
	restart(t, c, ts)
	if resumed := nextSession(t, sessions); resumed {
		t.Errorf("OnSession after a restart: resumed is true")
	}
}

func nextSession(t *testing.T, sessions chan bool) bool {
	t.Helper()
	select {
	case resumed := <-sessions:
		return resumed
	case <-time.After(callTimeout):
		t.Fatalf("OnSession was not called")
		return false
	}
}

// TestServerGone stops the server for good: calls fail with EIO once
// the reconnect bound has passed.
func TestServerGone(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{Reconnect: 200 * time.Millisecond})
	must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
	ts.stop()
	wantErrno(t, "Ping", try(c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{}), syscall.EIO)
	err := try(c, upstream.OpMkdir, &upstream.MknodReq{Parent: upstream.RootID, Name: "d", Mode: 0755}, &upstream.EntryResp{})
	wantErrno(t, "Mkdir", err, syscall.EIO)
	c.Close()
	wantErrno(t, "Ping after Close", try(c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{}), syscall.ENOTCONN)
}

// mute is a server that answers the handshake (if hello is set) and
// then reads requests without ever answering.
func mute(t *testing.T, hello bool) string {
	path := sockPath(t)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
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
			go serveMute(conn, hello)
		}
	}()
	return "unix://" + path
}

func serveMute(conn net.Conn, hello bool) {
	h, _, err := readRawFrame(conn)
	if err != nil {
		return
	}
	if hello {
		ch := upstream.ChallengeResp{Nonce: make([]byte, upstream.NonceSize)}
		conn.Write(rawFrame(upstream.KindReply, upstream.OpHello, h.ID, upstream.Marshal(nil, &ch)))
		if h, _, err = readRawFrame(conn); err != nil {
			return
		}
		resp := upstream.HelloResp{Version: upstream.Version, Session: 7, MaxFrame: upstream.MaxFrame,
			Root: upstream.Entry{Node: upstream.RootID}}
		conn.Write(rawFrame(upstream.KindReply, upstream.OpAuth, h.ID, upstream.Marshal(nil, &resp)))
	}
	io.Copy(io.Discard, conn)
}

func TestRequestTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	c := newClient(t, mute(t, true), upstream.ClientOptions{Timeout: timeout})
	start := time.Now()
	wantErrno(t, "Ping", try(c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{}), syscall.ETIMEDOUT)
	if d := time.Since(start); d < timeout {
		t.Errorf("timed out after %v, before the %v timeout", d, timeout)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	c2 := newClient(t, mute(t, true), upstream.ClientOptions{})
	wantErrno(t, "canceled Ping", c2.Call(ctx, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{}), syscall.EINTR)
}

func TestHandshakeTimeout(t *testing.T) {
	_, err := upstream.NewClient(context.Background(),
		upstream.ClientOptions{Addr: mute(t, false), Timeout: 200 * time.Millisecond, Logf: testLogf(t)})
	wantErrno(t, "NewClient", err, syscall.ETIMEDOUT)
}

// TestHardWaitsForHost: with no reconnect bound (a hard mount), a call
// made while the host is down waits and succeeds once a host is back on
// the same socket, and a call whose context ends gives up at once.
func TestHardWaitsForHost(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	timeout, reconnect := upstream.HostTimeout(-1)
	c := newClient(t, ts.addr, upstream.ClientOptions{Timeout: timeout, Reconnect: reconnect})
	must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
	ts.stop()
	done := make(chan error, 1)
	go func() {
		done <- c.Call(context.Background(), upstream.OpStatfs, &upstream.Empty{}, &upstream.StatfsResp{})
	}()
	ctx, cancel := context.WithCancel(context.Background())
	killed := make(chan error, 1)
	go func() { killed <- c.Call(ctx, upstream.OpStatfs, &upstream.Empty{}, &upstream.StatfsResp{}) }()
	time.Sleep(300 * time.Millisecond) // longer than the host is down in TestServerGone
	select {
	case err := <-done:
		t.Fatalf("Statfs with the host down ended before it came back: %v", err)
	default:
	}
	cancel()
	wantErrno(t, "Statfs whose context ended", waitErr(t, killed), syscall.EINTR)
	startServerAt(t, upstream.ServerOptions{Export: ts.export}, ts.addr)
	if err := waitErr(t, done); err != nil && !errors.Is(err, upstream.ErrSessionLost) {
		t.Errorf("Statfs after the host came back: %v", err)
	}
}

// TestCallInOtherSession: a request whose handle belongs to a session
// the host no longer has is not sent in the new one, where its ids are
// void or name other files: CallIn fails with ErrSessionLost.
func TestCallInOtherSession(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	_, h := create(t, c, upstream.RootID, "f")
	epoch := c.Epoch()
	restart(t, c, ts)
	_, h2 := create(t, c, upstream.RootID, "g") // may reuse h's number
	write(t, c, h2, 0, []byte("other"))
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var resp upstream.DataResp
	err := c.CallIn(ctx, epoch, upstream.OpRead, &upstream.ReadReq{Handle: h, Size: 10}, &resp)
	if !errors.Is(err, upstream.ErrSessionLost) {
		t.Errorf("CallIn of an old session's handle %d (new handle %d): got %v, data %q; want ErrSessionLost",
			h, h2, err, resp.Data)
	}
}

// TestSilentHostFails: a host that holds its connection but answers
// nothing, not even a ping (a stopped host), fails a request with EIO
// after one to two Reconnect bounds, long before the reply Timeout.
func TestSilentHostFails(t *testing.T) {
	c := newClient(t, mute(t, true), upstream.ClientOptions{Reconnect: 200 * time.Millisecond, Timeout: time.Hour})
	wantErrno(t, "Ping", try(c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{}), syscall.EIO)
}

//go:build linux

package upstream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/internal/posixtest"
	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// TestCancelBlockedLock cancels blocking lock requests, POSIX and
// flock, whose caller gave up: the call returns EINTR only once the host
// no longer waits, and after the holder lets go a third owner takes the
// lock at once.
func TestCancelBlockedLock(t *testing.T) {
	for _, flock := range []bool{false, true} {
		t.Run(fmt.Sprintf("flock=%v", flock), func(t *testing.T) {
			ts := startServer(t, upstream.ServerOptions{})
			c := newClient(t, ts.addr, upstream.ClientOptions{})
			if !c.Has(upstream.FeatCancel) {
				t.Fatal("the host did not offer FeatCancel")
			}
			e, holder := create(t, c, upstream.RootID, "locked")
			waiter, third := open(t, c, e.Node, syscall.O_RDWR), open(t, c, e.Node, syscall.O_RDWR)
			hostFile := filepath.Join(ts.export, "locked")
			must(t, c, upstream.OpSetlk, writeLock(holder, 1, flock, false), &upstream.Empty{})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Call(ctx, upstream.OpSetlk, writeLock(waiter, 2, flock, true), &upstream.Empty{}) }()
			waitUntil(t, "the lock request waits on the host", func() bool { return posixtest.LockWaiters(t, hostFile) == 1 })
			cancel()
			wantErrno(t, "cancelled lock", waitErr(t, done), syscall.EINTR)
			if n := posixtest.LockWaiters(t, hostFile); n != 0 {
				t.Errorf("%d lock requests still wait on the host after the cancelled call returned", n)
			}
			must(t, c, upstream.OpSetlk, unlockOf(holder, 1, flock), &upstream.Empty{})
			must(t, c, upstream.OpSetlk, writeLock(third, 3, flock, false), &upstream.Empty{})
		})
	}
}

// TestCancelAfterReconnect: a blocked lock request whose connection
// dropped is repeated on the next one, where its cancel reaches the
// first run, still waiting on the host.
func TestCancelAfterReconnect(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	holder, waiter := lockedFile(t, c, 1)
	hostFile := filepath.Join(ts.export, "locked")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Call(ctx, upstream.OpSetlk, lockWait(waiter), &upstream.Empty{}) }()
	waitUntil(t, "the lock request waits on the host", func() bool { return posixtest.LockWaiters(t, hostFile) == 1 })
	c.Drop()
	cancel()
	wantErrno(t, "cancelled lock", waitErr(t, done), syscall.EINTR)
	if n := posixtest.LockWaiters(t, hostFile); n != 0 {
		t.Errorf("%d lock requests still wait on the host after the cancelled call returned", n)
	}
	must(t, c, upstream.OpSetlk, unlock(holder), &upstream.Empty{})
	must(t, c, upstream.OpSetlk, writeLock(waiter, 3, false, false), &upstream.Empty{})
}

// TestCancelOlderHost: a host that does not offer FeatCancel is sent no
// cancel; the call returns EINTR and the host's wait goes on (the bug
// FeatCancel fixes).
func TestCancelOlderHost(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{WithheldFeatures: upstream.FeatCancel})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	e, holder := create(t, c, upstream.RootID, "locked")
	waiter := open(t, c, e.Node, syscall.O_RDWR)
	hostFile := filepath.Join(ts.export, "locked")
	must(t, c, upstream.OpSetlk, writeLock(holder, 1, false, false), &upstream.Empty{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Call(ctx, upstream.OpSetlk, writeLock(waiter, 2, false, true), &upstream.Empty{}) }()
	waitUntil(t, "the lock request waits on the host", func() bool { return posixtest.LockWaiters(t, hostFile) == 1 })
	before := ts.srv.Stats().Requests
	cancel()
	wantErrno(t, "cancelled lock", waitErr(t, done), syscall.EINTR)
	must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
	if n := ts.srv.Stats().Requests - before; n != 1 {
		t.Errorf("the host took %d requests after the caller gave up, want 1 (the ping): no cancel", n)
	}
	if n := posixtest.LockWaiters(t, hostFile); n != 1 {
		t.Errorf("%d lock requests wait on the host, want the abandoned one", n)
	}
}

// TestCancelOnTheWire pins OpCancel down with raw frames: the cancel is
// answered with an empty reply, the cancelled request with EINTR, and a
// cancel of a request that is not running does nothing.
func TestCancelOnTheWire(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	holder, waiter := lockedFile(t, c, 1)
	conn := dialRaw(t, ts.addr)
	rawResume(t, conn, c.Hello().Session)
	var none upstream.Empty
	rawCall(t, conn, rawRequest(upstream.OpCancel, 999, &upstream.CancelReq{ID: 12345}), &none)
	if _, err := conn.Write(rawRequest(upstream.OpSetlk, 1000, lockWait(waiter))); err != nil {
		t.Fatalf("Write: %v", err)
	}
	waitUntil(t, "the lock request waits on the host", func() bool {
		return posixtest.LockWaiters(t, filepath.Join(ts.export, "locked")) == 1
	})
	if _, err := conn.Write(rawRequest(upstream.OpCancel, 1001, &upstream.CancelReq{ID: 1000})); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got := map[uint64]upstream.Header{}
	for range 2 {
		h, _, err := readRawFrame(conn)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		got[h.ID] = h
	}
	if h := got[1001]; h.Op != upstream.OpCancel || h.Errno != 0 {
		t.Errorf("cancel's reply: got %+v, want OpCancel, errno 0", h)
	}
	if h := got[1000]; h.Op != upstream.OpSetlk || syscall.Errno(h.Errno) != syscall.EINTR {
		t.Errorf("cancelled lock's reply: got %+v, want OpSetlk, EINTR", h)
	}
	must(t, c, upstream.OpSetlk, unlock(holder), &upstream.Empty{})
}

// TestTakeLockGrantedFirst: a lock taken as its wait is cancelled is
// reported taken, so that the caller knows it holds it; a wait
// cancelled before it began is not begun.
func TestTakeLockGrantedFirst(t *testing.T) {
	cancel := make(chan struct{})
	close(cancel)
	waits := 0
	err := upstream.TakeLock(true, cancel, func(wait bool) error {
		if wait {
			waits++
			return nil
		}
		return unix.EAGAIN
	})
	if err != unix.EINTR || waits != 0 {
		t.Errorf("lock cancelled before its wait: got %v after %d waits, want EINTR after none", err, waits)
	}
	cancel = make(chan struct{})
	err = upstream.TakeLock(true, cancel, func(wait bool) error {
		if !wait {
			return unix.EAGAIN
		}
		close(cancel)
		time.Sleep(3 * 10 * time.Millisecond) // kicked meanwhile, outside any system call
		return nil
	})
	if err != nil {
		t.Errorf("lock granted as it was cancelled: got %v, want success", err)
	}
}

func writeLock(h, owner uint64, flock, wait bool) *upstream.LockReq {
	return &upstream.LockReq{Handle: h, Owner: owner, Flock: flock, Wait: wait,
		Lock: upstream.Lock{End: ^uint64(0), Type: unix.F_WRLCK}}
}

func unlockOf(h, owner uint64, flock bool) *upstream.LockReq {
	return &upstream.LockReq{Handle: h, Owner: owner, Flock: flock, Lock: upstream.Lock{End: ^uint64(0), Type: unix.F_UNLCK}}
}

func waitErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(callTimeout):
		t.Fatalf("the cancelled call still waits after %v", callTimeout)
		return nil
	}
}

// waitUntil polls cond until it holds, failing the test after
// callTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(callTimeout); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not so after %v: %s", callTimeout, what)
		}
	}
}

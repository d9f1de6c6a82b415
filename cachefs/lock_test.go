package cachefs_test

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/internal/posixtest"
	"golang.org/x/sys/unix"
)

// TestLockInterrupted: a blocking lock interrupted by a signal whose
// handler does not restart system calls fails with EINTR and leaves no
// lock and no wait behind on the host, for POSIX (OFD) locks and flock.
func TestLockInterrupted(t *testing.T) {
	eachLockKind(t, harness.Options{}, testLockInterrupted)
}

// TestLockRestarted: a blocking lock interrupted by a signal whose
// handler restarts system calls (SA_RESTART, as the Go runtime installs
// its own) is asked of the host again and waits on: it takes the lock
// once the holder lets go.
func TestLockRestarted(t *testing.T) {
	eachLockKind(t, harness.Options{}, testLockRestarted)
}

// eachLockKind runs test, as a subtest per lock kind, on a mount started
// with o whose whole tree is consistent.
func eachLockKind(t *testing.T, o harness.Options, test func(*testing.T, *harness.Env, lockKind)) {
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			env := harness.Start(t, o)
			env.FS.Register("", consistency.Consistent)
			test(t, env, kind)
		})
	}
}

// lockKind takes a write lock of a file, blocking or not, and lets go.
type lockKind struct {
	name   string
	lock   func(f *os.File, wait bool) error
	unlock func(f *os.File) error
}

var lockKinds = []lockKind{
	{"ofd", func(f *os.File, wait bool) error {
		cmd := unix.F_OFD_SETLK
		if wait {
			cmd = unix.F_OFD_SETLKW
		}
		return unix.FcntlFlock(f.Fd(), cmd, &unix.Flock_t{Type: unix.F_WRLCK, Len: 10})
	}, func(f *os.File) error {
		return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_UNLCK, Len: 10})
	}},
	{"flock", func(f *os.File, wait bool) error {
		how := unix.LOCK_EX
		if !wait {
			how |= unix.LOCK_NB
		}
		return unix.Flock(int(f.Fd()), how)
	}, func(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }},
}

// lockedByA makes the file "locked" on the host and opens it three times
// through the mount, A, B and C; A takes the lock.
func lockedByA(t *testing.T, env *harness.Env, kind lockKind) (hostPath string, a, b, c *os.File) {
	t.Helper()
	hostPath = filepath.Join(env.Export, "locked")
	if err := os.WriteFile(hostPath, make([]byte, 100), 0644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(env.Mountpoint, "locked")
	a, b, c = openRW(t, p), openRW(t, p), openRW(t, p)
	if err := kind.lock(a, false); err != nil {
		t.Fatalf("A's lock: %v", err)
	}
	return hostPath, a, b, c
}

// testLockInterrupted: A holds the lock; B, another open, blocks on the
// host until a signal interrupts it; when B's call has returned EINTR
// the host no longer waits for B; A lets go; then C, a third open,
// takes the lock without waiting.
func testLockInterrupted(t *testing.T, env *harness.Env, kind lockKind) {
	hostPath, a, b, c := lockedByA(t, env, kind)
	err := interrupted(t, func() error { return kind.lock(b, true) }, func() bool { return posixtest.LockWaiters(t, hostPath) > 0 })
	if !errors.Is(err, unix.EINTR) {
		t.Fatalf("B's blocking lock after the signal: got %v, want EINTR", err)
	}
	if n := posixtest.LockWaiters(t, hostPath); n != 0 {
		t.Errorf("B's lock returned EINTR, but %d lock requests still wait on the host", n)
	}
	if err := kind.unlock(a); err != nil {
		t.Fatalf("A's unlock: %v", err)
	}
	waitFor(t, "no lock request waiting on the host", func() bool { return posixtest.LockWaiters(t, hostPath) == 0 })
	if err := kind.lock(c, false); err != nil {
		t.Errorf("C's lock after A let go: %v (B's abandoned request took the lock on the host)", err)
	}
}

// testLockRestarted: A holds the lock; B blocks on the host until a
// signal interrupts it, the kernel sends its request again, and it
// waits on the host again; A lets go; B gets the lock, so C does not.
func testLockRestarted(t *testing.T, env *harness.Env, kind lockKind) {
	hostPath, a, b, c := lockedByA(t, env, kind)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGUSR1)
	defer signal.Stop(sigs)
	env.Kernel.Reset()
	tid, done := onThread(func() error { return kind.lock(b, true) })
	waitFor(t, "B's request waiting on the host", func() bool { return posixtest.LockWaiters(t, hostPath) == 1 })
	if err := unix.Tgkill(os.Getpid(), tid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	<-sigs
	waitFor(t, "B's request sent again and waiting on the host", func() bool {
		return env.Kernel.Count("SETLKW") >= 2 && posixtest.LockWaiters(t, hostPath) == 1
	})
	select {
	case err := <-done:
		t.Fatalf("B's blocking lock returned %v while A holds the lock", err)
	default:
	}
	if err := kind.unlock(a); err != nil {
		t.Fatalf("A's unlock: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("B's blocking lock after A let go: %v", err)
	}
	if err := kind.lock(c, false); !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("C's lock while B holds it: got %v, want EAGAIN", err)
	}
}

func openRW(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// interrupted runs call, which blocks, on a thread of its own, and once
// blocked() says it is, sends that thread SIGUSR1, caught by a handler
// that does not restart system calls. It returns what call returned.
func interrupted(t *testing.T, call func() error, blocked func() bool) error {
	t.Helper()
	sigs := catchNoRestart(t, unix.SIGUSR1)
	tid, done := onThread(call)
	waitFor(t, "the call blocked", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the blocking call returned %v before the signal", err)
		default:
		}
		return blocked()
	})
	if err := unix.Tgkill(os.Getpid(), tid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		<-sigs
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the blocking call still runs 20 s after the signal")
		return nil
	}
}

// onThread runs call on a thread of its own, whose id it returns, and
// sends what call returns on done.
func onThread(call func() error) (tid int, done <-chan error) {
	tids, errs := make(chan int, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- unix.Gettid()
		errs <- call()
	}()
	return <-tids, errs
}

// kernelSigaction is struct sigaction as rt_sigaction(2) takes it on
// amd64 and arm64.
type kernelSigaction struct {
	handler, flags, restorer uintptr
	mask                     uint64
}

const saRestart = 0x10000000

// catchNoRestart catches sig for the rest of the test with a handler
// that lets a system call it interrupts fail with EINTR, as a C program
// installing its handler without SA_RESTART does: the Go runtime's
// handler, with SA_RESTART cleared.
func catchNoRestart(t *testing.T, sig unix.Signal) <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig)
	old := rtSigaction(t, sig, nil)
	act := old
	act.flags &^= saRestart
	rtSigaction(t, sig, &act)
	t.Cleanup(func() {
		rtSigaction(t, sig, &old)
		signal.Stop(ch)
	})
	return ch
}

// rtSigaction sets sig's action to act unless it is nil, and returns
// the action before.
func rtSigaction(t *testing.T, sig unix.Signal, act *kernelSigaction) kernelSigaction {
	var old kernelSigaction
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(act)),
		uintptr(unsafe.Pointer(&old)), 8, 0, 0)
	if errno != 0 {
		t.Fatalf("rt_sigaction: %v", errno)
	}
	return old
}

// waitFor polls cond until it holds; it fails the test after a while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after 20 s", what)
		}
	}
}

//go:build linux

package upstream

import (
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Interrupting a host thread blocked in a lock system call. Linux has
// no other way to end a blocked F_OFD_SETLKW or flock than a signal to
// the thread, whose handler was installed without SA_RESTART (else the
// call restarts after it). So a lock that is held by another is waited
// for on a thread of its own (runtime.LockOSThread), after a first try
// that does not wait; once its request is cancelled that
// thread is sent lockSignal, again every kickEvery until the call
// returns, since a signal that arrives just before the call blocks is
// lost on it. The call then fails with EINTR, or succeeds if the lock
// was granted first: the guest is told either way.
//
// lockSignal is a real-time signal that the Go runtime catches at start
// and ignores unless the program asks os/signal for it; its handler is
// installed with SA_RESTART, which lockSignalReady clears (a process
// setting, made once: other system calls the signal could reach are
// this package's own lock calls, which call again). Where the signal is
// not caught (a program that ignores it, or a handler reset to the
// default, which would end the process), no signal is sent and a
// cancelled wait lasts until the lock is granted. The thread a signal
// was sent to is not given back to the runtime (the goroutine ends
// locked to it, and the thread exits): a signal still pending on it
// cannot reach another goroutine's system call.

// lockSignal is SIGRTMIN+6 in glibc's numbering.
const lockSignal = unix.Signal(40)

// kickEvery is how often a cancelled lock call's thread is signalled
// until the call returns.
const kickEvery = 10 * time.Millisecond

// takeLock takes a lock with lock(false), a system call that does not
// wait. If the lock is held (EAGAIN) and wait is set, it waits with
// lock(true) until that returns, or until cancel is closed: it then
// returns EINTR unless the lock was taken first. A nil cancel never
// closes.
func takeLock(wait bool, cancel <-chan struct{}, lock func(wait bool) error) error {
	err := lock(false)
	if !wait || err != unix.EAGAIN {
		return err
	}
	waitLock := func() error { return lock(true) }
	if cancel == nil {
		return waitLock()
	}
	res := make(chan error, 1)
	go lockOnThread(cancel, waitLock, res)
	return <-res
}

// lockOnThread is blockingLock's thread, which signals may interrupt.
func lockOnThread(cancel <-chan struct{}, lock func() error, res chan<- error) {
	runtime.LockOSThread()
	k := &kicker{tid: unix.Gettid(), done: make(chan struct{})}
	go k.run(cancel)
	err := lockUntil(cancel, lock)
	if !k.stop() {
		runtime.UnlockOSThread()
	}
	res <- err
}

// lockUntil calls lock until it returns other than EINTR, or cancel is
// closed.
func lockUntil(cancel <-chan struct{}, lock func() error) error {
	for {
		select {
		case <-cancel:
			return unix.EINTR
		default:
		}
		if err := lock(); err != unix.EINTR {
			return err
		}
	}
}

// kicker signals thread tid once cancel is closed, until stopped.
type kicker struct {
	tid  int           // immutable
	done chan struct{} // closed by stop

	mu      sync.Mutex // protects the following
	stopped bool
	sent    bool
}

func (k *kicker) run(cancel <-chan struct{}) {
	select {
	case <-cancel:
	case <-k.done:
		return
	}
	if !lockSignalReady() {
		return
	}
	t := time.NewTicker(kickEvery)
	defer t.Stop()
	for k.kick() {
		select {
		case <-t.C:
		case <-k.done:
			return
		}
	}
}

// kick signals the thread unless stopped, and reports whether it did.
func (k *kicker) kick() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return false
	}
	k.sent = true
	unix.Tgkill(unix.Getpid(), k.tid, lockSignal)
	return true
}

// stop ends the kicks and reports whether any was sent.
func (k *kicker) stop() bool {
	k.mu.Lock()
	k.stopped = true
	sent := k.sent
	k.mu.Unlock()
	close(k.done)
	return sent
}

// sigactionT is struct sigaction as rt_sigaction(2) takes it on amd64
// and arm64.
type sigactionT struct {
	handler, flags, restorer uintptr
	mask                     uint64
}

const (
	sigDFL    = 0
	sigIGN    = 1
	saRestart = 0x10000000
)

var lockSignalMu sync.Mutex // serializes lockSignalReady

// lockSignalReady makes lockSignal interrupt the system call it arrives
// in rather than restart it, and reports whether lockSignal may be sent:
// whether a handler catches it.
func lockSignalReady() bool {
	lockSignalMu.Lock()
	defer lockSignalMu.Unlock()
	var sa sigactionT
	if rtSigaction(lockSignal, nil, &sa) != nil || sa.handler == sigDFL || sa.handler == sigIGN {
		return false
	}
	if sa.flags&saRestart == 0 {
		return true
	}
	sa.flags &^= saRestart
	return rtSigaction(lockSignal, &sa, nil) == nil
}

func rtSigaction(sig unix.Signal, act, old *sigactionT) error {
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(act)),
		uintptr(unsafe.Pointer(old)), 8, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

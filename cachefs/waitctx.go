package cachefs

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// A request that waits for the host ends when its caller is dying, at
// once, whatever --host-timeout says, and only then. The kernel sends
// INTERRUPT for any signal to a caller blocked in a request it already
// handed to the daemon, and the answer then goes to the caller as it
// is: an EINTR for a signal the caller handles (Go programs handle
// SIGURG, many handle SIGCHLD or SIGWINCH) would fail a stat or a read
// that must not fail so. A caller killed by a signal never sees the
// answer, but the kernel holds it in uninterruptible sleep until it
// comes (fs/fuse/dev.c, request_wait_answer): that is what must end.
// A fatal signal marks SIGKILL pending in each of the dying process's
// threads, so after an INTERRUPT (go-fuse closes the request's cancel
// channel) the caller's thread is watched until SIGKILL is pending or
// it is gone, and the request's context ends then. Blocking locks are
// the exception: any signal cancels them (ops_lock.go), as fcntl's
// F_SETLKW and flock fail with EINTR.

// dyingPoll is how often an interrupted request's caller is checked
// for a fatal signal that came after the interrupt.
const dyingPoll = 100 * time.Millisecond

// waitCtx is the context of one kernel request's calls to the host: it
// ends when the request's caller is dying. The watch starts at the first
// Done (a call that waits for the host) and stops at release, which the
// request calls when it ends. Its zero value never ends.
type waitCtx struct {
	cancel <-chan struct{} // immutable: go-fuse's, closed at INTERRUPT
	tid    uint32          // immutable: the caller's thread; 0 if unknown

	once sync.Once
	done chan struct{} // closed when the caller is dying; set by once
	end  chan struct{} // closed by release; set by once
}

var _ context.Context = (*waitCtx)(nil)

// callerCtx returns the context of request h's waits for the host;
// the request must call release when it ends.
func callerCtx(cancel <-chan struct{}, h *fuse.InHeader) *waitCtx {
	return &waitCtx{cancel: cancel, tid: h.Caller.Pid}
}

func (c *waitCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *waitCtx) Value(any) any               { return nil }

func (c *waitCtx) Done() <-chan struct{} {
	c.once.Do(c.start)
	return c.done
}

func (c *waitCtx) Err() error {
	select {
	case <-c.Done():
		return context.Canceled
	default:
		return nil
	}
}

func (c *waitCtx) start() {
	if c.cancel == nil {
		return // never ends: done stays nil
	}
	c.done, c.end = make(chan struct{}), make(chan struct{})
	go c.watch()
}

// release ends the watch; Done never starts one afterwards.
func (c *waitCtx) release() {
	c.once.Do(func() {})
	if c.end != nil {
		close(c.end)
	}
}

func (c *waitCtx) watch() {
	select {
	case <-c.end:
		return
	case <-c.cancel:
	}
	t := time.NewTicker(dyingPoll)
	defer t.Stop()
	for !dying(c.tid) {
		select {
		case <-c.end:
			return
		case <-t.C:
		}
	}
	close(c.done)
}

// dying reports whether thread tid has SIGKILL pending (a fatal signal
// is being delivered to its process) or is gone. A caller the daemon
// cannot see (tid 0: another pid namespace) counts as dying once
// interrupted.
func dying(tid uint32) bool {
	if tid == 0 {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return true
	}
	const sigkill = 1 << (9 - 1)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || (string(k) != "SigPnd" && string(k) != "ShdPnd") {
			continue
		}
		if n, _ := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64); n&sigkill != 0 {
			return true
		}
	}
	return false
}

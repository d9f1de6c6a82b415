package cachefs

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"time"

	"github.com/cachefs/cachefs/upstream"
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
// it is gone, and the request's waits end then. Blocking locks are
// the exception: any signal cancels them (ops_lock.go), as fcntl's
// F_SETLKW and flock fail with EINTR.

// waitCtx is the context of one kernel request's calls to the host, an
// upstream.Interruptible: Done is go-fuse's cancel channel, closed at
// the kernel's INTERRUPT, and Dying says whether the caller is dying;
// upstream asks it again while the request waits. It costs no goroutine.
type waitCtx struct {
	cancel <-chan struct{} // immutable: go-fuse's, closed at INTERRUPT
	tid    uint32          // immutable: the caller's thread; 0 if unknown
}

var _ upstream.Interruptible = (*waitCtx)(nil)

// callerCtx returns the context of request h's waits for the host.
func callerCtx(cancel <-chan struct{}, h *fuse.InHeader) *waitCtx {
	return &waitCtx{cancel: cancel, tid: h.Caller.Pid}
}

func (c *waitCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *waitCtx) Value(any) any               { return nil }
func (c *waitCtx) Done() <-chan struct{}       { return c.cancel }
func (c *waitCtx) Dying() bool                 { return dying(c.tid) }

// Err is context.Canceled once the request was interrupted, whether or
// not its caller gives up.
func (c *waitCtx) Err() error {
	select {
	case <-c.cancel:
		return context.Canceled
	default:
		return nil
	}
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

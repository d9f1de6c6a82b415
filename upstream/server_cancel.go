//go:build linux

package upstream

import "sync"

// Cancelling blocked requests (FeatCancel). A blocking lock request
// waits on the host for as long as the lock's holder keeps it. When the
// guest's caller is interrupted by a signal, the guest sends OpCancel
// naming the request and waits for the request's own reply: the host
// interrupts the wait (lockwait.go), and the reply is EINTR, or success
// if the lock was taken before the cancel got there. Either way what
// the caller is told is what the host did, so no lock is ever held on
// the host for a caller that was told it does not hold it.
//
// The reader registers a cancellable request before it reads the next
// frame, so a cancel, which follows its request on the connection, finds
// it still running or finds nothing to do; it is answered by the reader
// itself. A repeat of a running request (replay.go) shares its first
// run's registration, and the session's end cancels whatever still
// waits.

// waits are a session's cancellable requests, by request id.
type waits struct {
	mu     sync.Mutex // protects the following
	byID   map[uint64]*wait
	closed bool // the session ended: every wait is cancelled
}

// wait is one cancellable request.
type wait struct {
	users  int           // runs of the request (a repeat shares it); waits.mu
	cancel chan struct{} // closed when the request is cancelled, under waits.mu
}

func newWaits() *waits {
	return &waits{byID: map[uint64]*wait{}}
}

// begin registers request id of op, if op is cancellable; end must
// follow. It returns nil for other ops.
func (ws *waits) begin(op Op, id uint64) *wait {
	if !cancellable(op) {
		return nil
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.byID[id]
	if w == nil {
		w = &wait{cancel: make(chan struct{})}
		if ws.closed {
			close(w.cancel)
		}
		ws.byID[id] = w
	}
	w.users++
	return w
}

// end unregisters a run of request id, begun as w.
func (ws *waits) end(id uint64, w *wait) {
	if w == nil {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.users--; w.users == 0 && ws.byID[id] == w {
		delete(ws.byID, id)
	}
}

// cancel cancels request id, if it is running.
func (ws *waits) cancel(id uint64) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.byID[id]; w != nil {
		w.stopLocked()
	}
}

// cancelAll cancels every request, now and to come: the session ended.
func (ws *waits) cancelAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.closed = true
	for _, w := range ws.byID {
		w.stopLocked()
	}
}

// stopLocked closes w.cancel once. Needs waits.mu.
func (w *wait) stopLocked() {
	select {
	case <-w.cancel:
	default:
		close(w.cancel)
	}
}

// cancelled returns the channel closed when w is cancelled; nil (never
// closed) for a nil w.
func (w *wait) cancelled() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.cancel
}

func (ss *session) cancel(req *CancelReq, _ *Empty) error {
	ss.waits.cancel(req.ID)
	return nil
}

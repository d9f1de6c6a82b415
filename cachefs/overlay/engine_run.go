package overlay

import (
	"time"

	"golang.org/x/sys/unix"
)

// runState is what the engine's goroutine keeps between passes.
type runState struct {
	waiting  []*flushReq
	full     bool      // the next pass rescans everything
	blind    bool      // write hints are incomplete: judge data by ctime
	dirty    time.Time // when the first change not yet passed was seen
	last     time.Time // when the last change was seen
	retryAt  time.Time // a failed pass runs again then
	backoff  time.Duration
	stopping bool
}

const maxBackoff = 5 * time.Second

func (e *Engine) run() {
	defer close(e.done)
	rs := &runState{full: true, blind: true}
	for !rs.stopping {
		e.wait(rs)
		if rs.stopping || !e.due(rs) {
			continue
		}
		e.passAndAnswer(rs)
	}
}

// wait blocks until an event, a request or a deadline.
func (e *Engine) wait(rs *runState) {
	fds := []unix.PollFd{{Fd: int32(e.wake), Events: unix.POLLIN}}
	if e.w != nil && rs.dirty.IsZero() {
		// While changes gather, their events are read when the
		// timeout ends, not as each comes: the kernel merges a
		// write's event into the same one left unread before it.
		fds = append(fds, unix.PollFd{Fd: int32(e.w.fd), Events: unix.POLLIN})
	}
	unix.Poll(fds, e.timeout(rs))
	var buf [8]byte
	unix.Read(e.wake, buf[:])
	if e.w != nil && e.w.read() {
		rs.last = time.Now()
		if rs.dirty.IsZero() {
			rs.dirty = rs.last
		}
	}
	for {
		select {
		case r := <-e.reqs:
			rs.waiting = append(rs.waiting, r)
			rs.full = true
			continue
		case <-e.stop:
			rs.stopping = true
		default:
		}
		return
	}
}

// timeout returns how long wait may block, in ms (-1: until woken).
func (e *Engine) timeout(rs *runState) int {
	if e.due(rs) {
		return 0
	}
	var at time.Time
	if !rs.dirty.IsZero() {
		at = e.gathered(rs)
	}
	if !rs.retryAt.IsZero() && (at.IsZero() || rs.retryAt.Before(at)) {
		at = rs.retryAt
	}
	if at.IsZero() {
		return -1
	}
	return int(max(time.Until(at).Milliseconds(), 1))
}

// due reports whether a pass should run now.
func (e *Engine) due(rs *runState) bool {
	now := time.Now()
	if !rs.retryAt.IsZero() {
		return !now.Before(rs.retryAt)
	}
	return len(rs.waiting) > 0 || rs.full || (!rs.dirty.IsZero() && !now.Before(e.gathered(rs)))
}

// gathered returns when the changes seen have gathered: once none came
// for Gather, or MaxGather after the first (at once if directories are
// quiet, quiet.go). A file written in many small writes is so sent once
// it is written, not again at every pass while it grows.
func (e *Engine) gathered(rs *runState) time.Time {
	if e.w != nil && len(e.w.quiets) > 0 {
		return rs.dirty.Add(e.o.MaxGather) // their writers raise no events to pause
	}
	at := rs.last.Add(e.o.Gather)
	if limit := rs.dirty.Add(e.o.MaxGather); limit.Before(at) {
		return limit
	}
	return at
}

// passAndAnswer runs a pass and answers the flushes it covered.
func (e *Engine) passAndAnswer(rs *runState) {
	waiting, full := rs.waiting, rs.full
	rs.waiting, rs.dirty = nil, time.Time{}
	out := e.pass(full, rs.blind)
	e.rescan = append(e.rescan, out.rescan...)
	if out.err != nil || out.retry {
		e.count(func(s *Stats) { s.Retries++ })
		rs.backoff = min(max(2*rs.backoff, 50*time.Millisecond), maxBackoff)
		rs.retryAt = time.Now().Add(rs.backoff)
		rs.full = true
		if out.err != nil {
			e.o.Logf("overlay: write-back of %s: %v (again in %v)", e.o.Upper, out.err, rs.backoff)
			rs.waiting = waiting // not done: they wait for a pass that gets through
			return
		}
	} else {
		rs.backoff, rs.retryAt, rs.full = 0, time.Time{}, false
	}
	if full {
		rs.blind = false
	}
	if out.again && out.err == nil {
		rs.full = true // at once: what this pass moved aside goes in place
		rs.waiting = append(waiting, rs.waiting...)
		return
	}
	if len(out.rescan) > 0 && out.err == nil {
		rs.dirty = time.Now().Add(-e.o.Gather) // at once: the moved directories
		rs.last = rs.dirty
		rs.waiting = append(waiting, rs.waiting...)
		return
	}
	e.mu.Lock()
	for _, r := range waiting {
		r.reply <- e.failuresUnderLocked(r.path)
	}
	e.mu.Unlock()
	if e.w != nil && e.w.pending() && rs.dirty.IsZero() {
		rs.dirty, rs.last = time.Now(), time.Now() // the next pass wakes or rescans them
	}
}

func (e *Engine) count(f func(*Stats)) {
	e.mu.Lock()
	f(&e.stats)
	e.mu.Unlock()
}

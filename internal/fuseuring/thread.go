package fuseuring

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// A thread serves a queue: it submits the queue's commands, waits for
// completions and answers each request itself, which for an answer from
// memory costs nothing more (Handoff in doc.go). When a request takes
// longer than opts.HandOff, the queue is handed off: the thread goes on
// with its request, and a spare thread, or a new one, serves the queue.
// Once it has answered, the first thread queues its commit for the
// serving thread and waits as a spare. Each thread is locked to its OS
// thread for good and runs nothing else (Submitting in doc.go).
//
// A request is overdue when the watch (check) finds the thread answering
// it twice in a row, opts.HandOff apart: so it is handed off after
// between one and two HandOffs. The watch runs only while the thread
// serves requests; the thread's own cost per request is three atomic
// operations (a timer reset per request cost 0.5 us: it woke Go's
// netpoller), and a fourth that names the entry for an overdue
// request's signal watch (watchOverdue).
type thread struct {
	q   *queue
	gen uint64        // the generation it serves the queue as; under q.mu
	run chan struct{} // a spare is handed the queue

	n        uint64                // requests it began; the thread's own
	cur      atomic.Uint64         // the number of the request it answers, 0 between requests
	ent      atomic.Pointer[entry] // the entry of request cur, set before cur
	watching atomic.Bool           // watch is scheduled
	watch    *time.Timer           // runs check
	seen     uint64                // cur at the last check; check's own
}

func newThread(q *queue, gen uint64) *thread {
	t := &thread{q: q, gen: gen, run: make(chan struct{}, 1)}
	t.watch = time.AfterFunc(time.Hour, t.check)
	t.watch.Stop()
	return t
}

// serve runs the thread; the queue's first thread registers its entries
// first and tells ready how that went.
func (t *thread) serve(ready chan<- error) {
	q := t.q
	defer q.rings.wg.Done()
	runtime.LockOSThread() // never unlocked: its commands stay its own
	if q.pinned {
		if err := pin(q.id); err != nil {
			q.opts.Logf("fuseuring: queue %d: pinning a thread: %v", q.id, err)
		}
	}
	if ready != nil {
		err := q.register()
		ready <- err
		if err != nil {
			return
		}
	}
	for t.loop() && t.spare() {
	}
}

// loop serves the queue until it stops (false) or is handed off while
// this thread answers a request (true).
func (t *thread) loop() bool {
	q := t.q
	for {
		n, ok := q.submission()
		if !ok {
			return false
		}
		if err := q.r.enter(n, 1); err != nil {
			q.opts.Logf("fuseuring: queue %d: %v", q.id, err)
			q.stop()
			return false
		}
		for {
			user, res, ok := q.r.pop()
			if !ok {
				break
			}
			if user == wakeUser {
				q.woken(res)
				continue
			}
			if res < 0 {
				if res != -int32(syscall.ENOTCONN) {
					q.opts.Logf("fuseuring: queue %d: %v", q.id, syscall.Errno(-res))
				}
				q.stop()
				return false
			}
			if !t.answer(user) {
				return true
			}
		}
	}
}

// answer answers the request in entry user and reports whether this
// thread still serves the queue. A blocking lock is answered from a
// goroutine of its own: it waits on other requests, and its caller's
// signals are watched (Interrupts in doc.go).
func (t *thread) answer(user uint64) bool {
	q := t.q
	e := q.ents[user]
	q.held.Add(1)
	if e.opcode() == opSetLkW {
		go q.answerLock(e, user)
		return true
	}
	t.n++
	t.ent.Store(e)
	t.cur.Store(t.n)
	if !t.watching.Load() && t.watching.CompareAndSwap(false, true) {
		t.watch.Reset(q.opts.HandOff)
	}
	c := serveEntry(q.ps, e)
	t.cur.Store(0)
	return q.commit(t, user, c)
}

func (q *queue) answerLock(e *entry, user uint64) {
	h := (*fuse.InHeader)(unsafe.Pointer(&e.hdr[0]))
	stop := q.watchSignals(h.Unique, h.Pid)
	c := serveEntry(q.ps, e)
	stop()
	q.commit(nil, user, c)
}

// check runs every opts.HandOff while t answers requests: it hands the
// queue off if t still answers the request it answered at the last
// check, and stops when t answers none.
func (t *thread) check() {
	c := t.cur.Load()
	if c == 0 {
		t.watching.Store(false)
		// A request that began meanwhile may have seen the watch on.
		if c = t.cur.Load(); c == 0 || !t.watching.CompareAndSwap(false, true) {
			return
		}
	}
	if c == t.seen && t.handOff(c) {
		t.watching.Store(false) // until t serves the queue again
		return
	}
	t.seen = c
	t.watch.Reset(t.q.opts.HandOff)
}

// handOff gives the queue to another thread if t serves it and still
// answers request c, and reports whether t serves it no more.
func (t *thread) handOff(c uint64) bool {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped || t.gen != q.gen {
		return true
	}
	if t.cur.Load() != c {
		return false
	}
	q.gen++
	q.rings.handoffs.Add(1)
	q.handOffLocked()
	if e := t.ent.Load(); e != nil {
		h := (*fuse.InHeader)(unsafe.Pointer(&e.hdr[0]))
		go t.watchOverdue(c, h.Unique, h.Pid)
	}
	return true
}

// watchOverdue interrupts request c, handed off as overdue, once its
// caller tid has a signal pending, as the kernel's INTERRUPT would have
// (Interrupts in doc.go); it ends when t answered c. If t went on to
// another request before unique was read, the watch ends at its first
// look.
func (t *thread) watchOverdue(c, unique uint64, tid uint32) {
	tk := time.NewTicker(signalPoll)
	defer tk.Stop()
	for range tk.C {
		if t.cur.Load() != c {
			return
		}
		if signalPending(tid) {
			interrupt(t.q.ps, unique)
			return
		}
	}
}

// handOffLocked gives the queue to a spare thread, or to a new one, as
// generation q.gen. Needs mu.
func (q *queue) handOffLocked() {
	if n := len(q.spares); n > 0 {
		t := q.spares[n-1]
		q.spares = q.spares[:n-1]
		t.gen = q.gen
		t.run <- struct{}{}
		return
	}
	q.rings.wg.Add(1)
	go newThread(q, q.gen).serve(nil)
}

// spare waits until the queue is handed to t (true) or stops (false).
func (t *thread) spare() bool {
	q := t.q
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return false
	}
	q.spares = append(q.spares, t)
	q.mu.Unlock()
	select {
	case <-t.run:
		return true
	case <-q.done:
		return false
	}
}

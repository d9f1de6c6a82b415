package fuseuring

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// queue is one CPU's ring queue. Only the thread that serves it submits
// to its ring: the kernel hands a request to an idle entry in the
// context of the thread that submitted the entry's last command (a
// task_work), which must not be a thread that may itself wait for a
// request (see Submitting in doc.go). That thread changes when a request
// takes longer than opts.HandOff (thread.go).
type queue struct {
	id, fd int
	ps     *fuse.ProtocolServer
	opts   Options
	rings  *Rings
	pinned bool          // the daemon may run on CPU id: its threads are pinned there
	depth  int           // entries kept waiting for requests (opts.Depth, or 1 if not pinned)
	done   chan struct{} // closed when the queue stops

	// Set by register before any other goroutine uses the queue; r and
	// wake are closed by stop.
	r    *ring
	wake int // eventfd that other goroutines write to wake the serving thread

	// The serving thread's; appended to under mu. An entry's index is its
	// user data.
	ents []*entry

	held atomic.Int32 // entries holding a request whose commit is not queued yet

	mu      sync.Mutex // protects the following and the submission queue (nextSQE)
	pending uint32     // commands queued, not yet submitted
	stopped bool       // the ring is closed
	gen     uint64     // generation of the thread serving the queue; a handoff adds one
	spares  []*thread  // threads that were handed off from and finished their request
}

func newQueue(cpu, fd int, ps *fuse.ProtocolServer, o Options, rs *Rings, pinned bool) *queue {
	q := &queue{id: cpu, fd: fd, ps: ps, opts: o, rings: rs, pinned: pinned, depth: o.Depth, done: make(chan struct{})}
	if !pinned {
		q.depth = 1 // no caller runs on this CPU now
	}
	return q
}

// start registers the queue's entries from its first thread.
func (q *queue) start() error {
	ready := make(chan error)
	q.rings.wg.Add(1)
	go newThread(q, 0).serve(ready)
	return <-ready
}

// register sets the ring up and queues the first entries' registration.
func (q *queue) register() error {
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	r, err := newRing(2 * maxEntries)
	if err != nil {
		unix.Close(wake)
		return err
	}
	q.r, q.wake = r, wake
	q.mu.Lock()
	defer q.mu.Unlock()
	q.armWakeLocked()
	for i := 0; i < q.depth; i++ {
		if err := q.addEntryLocked(); err != nil {
			q.stopLocked()
			return err
		}
	}
	return nil
}

// addEntryLocked maps a new entry and queues its registration. Needs mu.
func (q *queue) addEntryLocked() error {
	e, err := newEntry(q.opts.Payload)
	if err != nil {
		return err
	}
	user := uint64(len(q.ents))
	q.ents = append(q.ents, e)
	sqe := q.r.nextSQE()
	q.prepCmd(sqe, cmdRegister, user, 0)
	*(*uint64)(unsafe.Pointer(&sqe[16])) = uint64(uintptr(unsafe.Pointer(&e.iov[0])))
	*(*uint32)(unsafe.Pointer(&sqe[24])) = 2
	q.pending++
	return nil
}

// submission returns how many queued commands wait to be submitted, and
// counts them as submitted, or false once the queue stopped; first it
// registers new entries while fewer than depth wait for requests (those
// held by handed-off requests do not), up to maxEntries.
func (q *queue) submission() (uint32, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return 0, false
	}
	for len(q.ents)-int(q.held.Load()) < q.depth && len(q.ents) < maxEntries {
		if err := q.addEntryLocked(); err != nil {
			q.opts.Logf("fuseuring: queue %d: a new entry: %v", q.id, err)
			break
		}
	}
	n := q.pending
	q.pending = 0
	return n, true
}

// prepCmd fills sqe with a FUSE ring command; fuse_uring_cmd_req is in
// the SQE128 command area at byte 48.
func (q *queue) prepCmd(sqe []byte, cmd uint32, user, commit uint64) {
	sqe[0] = opURingCmd
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(q.fd)
	*(*uint32)(unsafe.Pointer(&sqe[8])) = cmd
	*(*uint64)(unsafe.Pointer(&sqe[32])) = user
	*(*uint64)(unsafe.Pointer(&sqe[56])) = commit
	*(*uint16)(unsafe.Pointer(&sqe[64])) = uint16(q.id)
}

// commit queues the COMMIT_AND_FETCH of entry user, whose answer has
// commit id c, from thread t (nil: a goroutine of its own); the thread
// serving the queue submits it, woken unless it is t. It reports whether
// t still serves the queue.
func (q *queue) commit(t *thread, user, c uint64) bool {
	q.rings.requests.Add(1)
	q.held.Add(-1)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return false // the kernel failed the request at the unmount
	}
	serving := t != nil && t.gen == q.gen
	q.prepCmd(q.r.nextSQE(), cmdCommitAndFetch, user, c)
	q.pending++
	if !serving {
		q.wakeLocked()
	}
	return serving
}

// wakeLocked wakes the serving thread: the poll of q.wake completes.
// Needs mu (q.wake is open).
func (q *queue) wakeLocked() {
	one := [8]byte{1}
	if _, err := unix.Write(q.wake, one[:]); err != nil && err != unix.EAGAIN {
		q.opts.Logf("fuseuring: queue %d: wake: %v", q.id, err)
	}
}

// armWakeLocked queues a poll of q.wake, whose completion wakes the
// serving thread. Needs mu.
func (q *queue) armWakeLocked() {
	sqe := q.r.nextSQE()
	sqe[0] = opPollAdd
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(q.wake)
	*(*uint32)(unsafe.Pointer(&sqe[28])) = unix.POLLIN // poll32_events
	*(*uint64)(unsafe.Pointer(&sqe[32])) = wakeUser
	q.pending++
}

// woken handles the wake-up poll's completion, with result res, on the
// serving thread: it empties the eventfd and polls it again; the
// commits queued meanwhile go with the next submission.
func (q *queue) woken(res int32) {
	if res < 0 {
		q.opts.Logf("fuseuring: queue %d: wake-up poll: %v", q.id, syscall.Errno(-res))
	}
	var b [8]byte
	unix.Read(q.wake, b[:])
	q.mu.Lock()
	q.armWakeLocked()
	q.mu.Unlock()
}

// stop closes the ring and the wake-up eventfd, once; later commits are
// dropped (the kernel failed their requests when the mount went), and
// the threads waiting as spares end.
func (q *queue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopLocked()
}

func (q *queue) stopLocked() {
	if q.stopped {
		return
	}
	q.stopped = true
	close(q.done)
	q.r.close()
	unix.Close(q.wake)
}

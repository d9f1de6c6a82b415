package cachefs

import (
	"sync"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// forgetQueue batches host forgets off the request path: the kernel's
// FORGET has no reply, and one message can carry many.
type forgetQueue struct {
	fs *FS // immutable

	mu     sync.Mutex // protects the following
	items  []upstream.ForgetItem
	epoch  uint64
	kick   chan struct{}
	closed bool
}

const forgetBatch = 1024

func newForgetQueue(fs *FS) *forgetQueue {
	q := &forgetQueue{fs: fs, kick: make(chan struct{}, 1)}
	go q.run()
	return q
}

// add queues refs host references of up, a node of epoch.
func (q *forgetQueue) add(up, epoch, refs uint64) {
	if refs == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if epoch != q.epoch {
		q.items, q.epoch = nil, epoch // references of a lost session are void
	}
	q.items = append(q.items, upstream.ForgetItem{Node: up, Count: refs})
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *forgetQueue) run() {
	for range q.kick {
		time.Sleep(time.Millisecond) // let a burst of forgets gather
		for q.flush() {
		}
	}
}

// flush sends one batch; it reports whether more are waiting.
func (q *forgetQueue) flush() bool {
	q.mu.Lock()
	if q.closed || len(q.items) == 0 {
		q.mu.Unlock()
		return false
	}
	n := min(len(q.items), forgetBatch)
	batch, epoch := q.items[:n:n], q.epoch
	q.items = q.items[n:]
	more := len(q.items) > 0
	q.mu.Unlock()
	if epoch == q.fs.up.Epoch() {
		q.fs.rpc(upstream.OpForget, &upstream.ForgetReq{Items: batch}, &upstream.Empty{})
	}
	return more
}

func (q *forgetQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.kick)
	}
}

package upstream

import "sync"

// eventQueue decouples event delivery from the connection's reader: push
// never blocks, and a goroutine of its own hands batches to the handler
// in order.
type eventQueue struct {
	handler func(*EventBatch) // immutable

	mu     sync.Mutex // protects the following
	cond   *sync.Cond
	q      []*EventBatch
	closed bool
}

func newEventQueue(h func(*EventBatch)) *eventQueue {
	q := &eventQueue{handler: h}
	q.cond = sync.NewCond(&q.mu)
	if h != nil {
		go q.run()
	}
	return q
}

func (q *eventQueue) push(b *EventBatch) {
	if q.handler == nil {
		return
	}
	q.mu.Lock()
	q.q = append(q.q, b)
	q.mu.Unlock()
	q.cond.Signal()
}

func (q *eventQueue) run() {
	for {
		q.mu.Lock()
		for len(q.q) == 0 && !q.closed {
			q.cond.Wait()
		}
		if q.closed {
			q.mu.Unlock()
			return
		}
		b := q.q[0]
		q.q = q.q[1:]
		q.mu.Unlock()
		q.handler(b)
	}
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

package upstream

import "sync"

// eventQueue decouples event delivery from the connection's reader: push
// never blocks, and a goroutine of its own hands batches to the handler
// in order.
type eventQueue struct {
	mu      sync.Mutex // protects the following
	handler func(*EventBatch)
	cond    *sync.Cond
	q       []*EventBatch
	closed  bool
}

func newEventQueue(h func(*EventBatch)) *eventQueue {
	q := &eventQueue{handler: h}
	q.cond = sync.NewCond(&q.mu)
	go q.run()
	return q
}

// setHandler replaces the handler; nil drops batches.
func (q *eventQueue) setHandler(h func(*EventBatch)) {
	q.mu.Lock()
	q.handler = h
	q.mu.Unlock()
}

func (q *eventQueue) push(b *EventBatch) {
	q.mu.Lock()
	if q.handler != nil {
		q.q = append(q.q, b)
	}
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
		b, h := q.q[0], q.handler
		q.q = q.q[1:]
		q.mu.Unlock()
		if h != nil {
			h(b)
		}
	}
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

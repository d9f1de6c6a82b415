package invalidation

import (
	"sync"
	"sync/atomic"
	"time"
)

// Batcher coalesces changes into batches: the first change of a batch
// waits at most Window for others, identical changes are sent once, and
// a full batch goes at once. Batches go to send, one at a time and in
// order, from a goroutine of the batcher's. If send falls behind by
// MaxQueued batches, what waits is replaced by Overflow changes of the
// roots it touched: the receiver then invalidates those subtrees whole.
type Batcher struct {
	opts BatcherOptions // immutable

	mu      sync.Mutex // protects the following
	pending []Change
	seen    map[Change]bool
	first   time.Time // when pending's first change arrived
	timer   *time.Timer
	closed  bool

	queue chan batch

	Changes   atomic.Uint64 // changes added
	Coalesced atomic.Uint64 // changes dropped as duplicates
	Overflows atomic.Uint64 // batches collapsed into overflows
	Batches   atomic.Uint64 // batches sent
}

// BatcherOptions configure a Batcher; zero fields take defaults.
type BatcherOptions struct {
	Send      func(changes []Change, first time.Time) // required
	Window    time.Duration                           // 0: 2ms
	MaxBatch  int                                     // 0: 1024
	MaxQueued int                                     // 0: 64
}

type batch struct {
	changes []Change
	first   time.Time
}

func NewBatcher(o BatcherOptions) *Batcher {
	if o.Window == 0 {
		o.Window = 2 * time.Millisecond
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 1024
	}
	if o.MaxQueued == 0 {
		o.MaxQueued = 64
	}
	b := &Batcher{opts: o, seen: map[Change]bool{}, queue: make(chan batch, o.MaxQueued)}
	go b.run()
	return b
}

// Add queues a change.
func (b *Batcher) Add(c Change) {
	b.Changes.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if b.seen[c] {
		b.Coalesced.Add(1)
		return
	}
	b.seen[c] = true
	b.pending = append(b.pending, c)
	if len(b.pending) == 1 {
		b.first = time.Now()
		b.timer = time.AfterFunc(b.opts.Window, b.flush)
	}
	if len(b.pending) >= b.opts.MaxBatch {
		b.timer.Stop()
		b.flushLocked()
	}
}

func (b *Batcher) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

// flushLocked hands pending to the sender, or collapses it into
// overflows if the sender is too far behind (and retries later).
func (b *Batcher) flushLocked() {
	if len(b.pending) == 0 || b.closed {
		return
	}
	select {
	case b.queue <- batch{b.pending, b.first}:
		b.pending, b.seen = nil, map[Change]bool{}
	default:
		b.Overflows.Add(1)
		b.pending = collapse(b.pending)
		b.seen = map[Change]bool{}
		for _, c := range b.pending {
			b.seen[c] = true
		}
		b.timer = time.AfterFunc(b.opts.Window, b.flush)
	}
}

// collapse replaces changes by an overflow of each root they touched.
func collapse(cs []Change) []Change {
	roots := map[dirID]bool{}
	var out []Change
	for _, c := range cs {
		id := dirID{c.RootDev, c.RootIno}
		if !roots[id] {
			roots[id] = true
			out = append(out, Change{Op: Overflow, DirDev: c.RootDev, DirIno: c.RootIno, RootDev: c.RootDev, RootIno: c.RootIno})
		}
	}
	return out
}

func (b *Batcher) run() {
	for bt := range b.queue {
		b.Batches.Add(1)
		b.opts.Send(bt.changes, bt.first)
	}
}

// Close stops the batcher; pending changes are dropped.
func (b *Batcher) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.queue)
	}
}

package upstream

import "sync"

// Exactly-once requests across reconnects. A guest whose connection
// drops with requests in flight cannot tell which of them the host ran.
// It sends them again, with the same request ids, once it is back on the
// same session (FeatReplay). The session keeps the replies of its
// state-changing requests by id, so a repeated request is answered with
// its first execution's reply instead of running twice: no second create
// failing with EEXIST, no append written twice, no host reference taken
// twice by a lookup. A repeat that arrives while the first execution is
// still running waits for it.
//
// The cache is bounded: the newest replayMaxEntries finished replies,
// replayMaxBytes in all, each at most replayMaxFrame; a larger reply
// (a big ReadTree) is not kept, and its request runs again if repeated.
// Requests that change nothing (pure) are never kept.

const (
	replayMaxEntries = 4096
	replayMaxBytes   = 8 << 20
	replayMaxFrame   = 256 << 10
)

type replayCache struct {
	mu    sync.Mutex // protects the following
	byID  map[uint64]*replayEntry
	order []uint64 // finished ids, oldest first
	bytes int
}

// replayEntry is one request: running until done is closed, then frame
// is its reply (nil if not kept).
type replayEntry struct {
	done  chan struct{}
	frame []byte // set before done is closed
}

func newReplayCache() *replayCache {
	return &replayCache{byID: map[uint64]*replayEntry{}}
}

// begin registers request id. first is false for a repeat; its reply is
// then e.frame once e.done is closed (nil: run it again).
func (c *replayCache) begin(id uint64) (e *replayEntry, first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byID[id]; e != nil {
		return e, false
	}
	e = &replayEntry{done: make(chan struct{})}
	c.byID[id] = e
	return e, true
}

// finish records the reply frame of request id, begun as e.
func (c *replayCache) finish(id uint64, e *replayEntry, frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(frame) > replayMaxFrame {
		delete(c.byID, id)
		close(e.done)
		return
	}
	e.frame = frame
	close(e.done)
	c.order = append(c.order, id)
	c.bytes += len(frame)
	for len(c.order) > replayMaxEntries || c.bytes > replayMaxBytes {
		old := c.order[0]
		c.order = c.order[1:]
		if oe := c.byID[old]; oe != nil {
			c.bytes -= len(oe.frame)
			delete(c.byID, old)
		}
	}
}

// forgetRunning drops request id begun as e without a reply to keep
// (the connection failed before the handler could answer): a repeat runs
// it again.
func (c *replayCache) forgetRunning(id uint64, e *replayEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID[id] == e {
		delete(c.byID, id)
	}
	close(e.done)
}

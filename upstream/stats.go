package upstream

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts a client's requests: per op the count and a window of
// recent latencies for percentiles, the requests outstanding, and the
// frames sent and received.
type Stats struct {
	sent, received atomic.Uint64
	outstanding    atomic.Int64

	mu  sync.Mutex // protects ops
	ops map[Op]*opStats
}

const latencyWindow = 8192

type opStats struct {
	count uint64
	max   time.Duration
	ring  []time.Duration
	next  int
}

func newStats() *Stats { return &Stats{ops: map[Op]*opStats{}} }

func (s *Stats) begin() { s.outstanding.Add(1) }

func (s *Stats) end(op Op, d time.Duration) {
	s.outstanding.Add(-1)
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.ops[op]
	if o == nil {
		o = &opStats{}
		s.ops[op] = o
	}
	o.count++
	o.max = max(o.max, d)
	if len(o.ring) < latencyWindow {
		o.ring = append(o.ring, d)
	} else {
		o.ring[o.next] = d
		o.next = (o.next + 1) % latencyWindow
	}
}

// OpSummary is one op's figures.
type OpSummary struct {
	Op                  string
	Count               uint64
	P50, P90, P98, P100 time.Duration
}

// Snapshot is the client's figures at one moment.
type Snapshot struct {
	Sent, Received uint64
	Outstanding    int64
	Ops            []OpSummary
}

func (s *Stats) Snapshot() Snapshot {
	snap := Snapshot{Sent: s.sent.Load(), Received: s.received.Load(), Outstanding: s.outstanding.Load()}
	s.mu.Lock()
	defer s.mu.Unlock()
	for op, o := range s.ops {
		r := slices.Clone(o.ring)
		slices.Sort(r)
		pct := func(p int) time.Duration { return r[min(len(r)-1, len(r)*p/100)] }
		snap.Ops = append(snap.Ops, OpSummary{Op: op.String(), Count: o.count,
			P50: pct(50), P90: pct(90), P98: pct(98), P100: o.max})
	}
	slices.SortFunc(snap.Ops, func(a, b OpSummary) int { return int(b.Count) - int(a.Count) })
	return snap
}

// Requests returns how many requests of op completed.
func (s *Stats) Requests(op Op) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.ops[op]; o != nil {
		return o.count
	}
	return 0
}

// Total returns how many requests completed, of any op.
func (s *Stats) Total() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	for _, o := range s.ops {
		n += o.count
	}
	return n
}

// String is op's name in the ops table (ops_table.go).
func (op Op) String() string {
	if n := op.info().name; n != "" {
		return n
	}
	return "op" + strconv.Itoa(int(op))
}

package cachefs

import (
	"slices"
	"sync"
	"time"

	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream"
)

// Host events arrive in batches on the client's event goroutine, never
// a request handler's. For each batch the guest drops what it caches of
// the changed names and nodes, tells the kernel the same (no lock held),
// raises inotify events for the guest's watchers through the actuator,
// and acknowledges the batch.

// EventStats count host events and how late they became visible.
type EventStats struct {
	Batches, Events, Overflows, Actuated, ActuateErrors uint64
	// PeerChanges counts changes the guest made through its other
	// connections, applied here as events are.
	PeerChanges uint64
	// ActuateDropped counts inotify events not raised because the guest
	// fell behind: caches were invalidated all the same.
	ActuateDropped uint64
	// Latency from the host seeing a change to the guest having dropped
	// its caches and told the kernel, over recent batches.
	P50, P90, P99, P100 time.Duration
}

type eventStats struct {
	mu  sync.Mutex // protects the following
	s   EventStats
	lat []time.Duration // ring of recent latencies
	pos int
}

func (es *eventStats) batch(events int, lat time.Duration) {
	es.mu.Lock()
	defer es.mu.Unlock()
	es.s.Batches++
	es.s.Events += uint64(events)
	if len(es.lat) < 4096 {
		es.lat = append(es.lat, lat)
	} else {
		es.lat[es.pos] = lat
		es.pos = (es.pos + 1) % len(es.lat)
	}
}

func (es *eventStats) add(f func(s *EventStats)) {
	es.mu.Lock()
	f(&es.s)
	es.mu.Unlock()
}

func (es *eventStats) snapshot() EventStats {
	es.mu.Lock()
	defer es.mu.Unlock()
	s := es.s
	if n := len(es.lat); n > 0 {
		l := slices.Clone(es.lat)
		slices.Sort(l)
		s.P50, s.P90, s.P99, s.P100 = l[n*50/100], l[n*90/100], l[n*99/100], l[n-1]
	}
	return s
}

// absorb applies a batch of events: from the host (counted, with their
// latency), or the guest's own changes made through another connection.
// The caller acknowledges host batches.
func (fs *FS) absorb(b *upstream.EventBatch, host bool) {
	epoch := fs.up.Epoch()
	var inv invalidations
	var acts []actuation
	for i := range b.Events {
		e := &b.Events[i]
		if e.Kind == upstream.EvSubtree {
			fs.evStats.add(func(s *EventStats) { s.Overflows++ })
			inv.all = true
			continue
		}
		fs.dropForEvent(e, epoch, &inv)
		acts = append(acts, fs.actuationFor(e, epoch))
	}
	if inv.all {
		fs.invalidateAll()
	} else {
		fs.notifyKernel(inv.ids, inv.names)
	}
	if host {
		fs.evStats.batch(len(b.Events), time.Since(time.Unix(0, b.Time)))
	} else {
		fs.evStats.add(func(s *EventStats) { s.PeerChanges += uint64(len(b.Events)) })
	}
	fs.queueActuations(pairMoves(acts), epoch)
}

// invalidations gathers what the kernel must be told.
type invalidations struct {
	ids   []uint64
	names []kernelName
	all   bool
}

// dropForEvent drops the guest's caches of what an event changed and
// notes the kernel's.
func (fs *FS) dropForEvent(e *upstream.Event, epoch uint64, inv *invalidations) {
	fs.overlayConflict(e, epoch)
	if fs.conflict(e, epoch) {
		return // the guest is authoritative there: its view wins
	}
	if e.Node != 0 {
		fs.cache.dropAttr(e.Node)
		if n := fs.nodes.byHost(e.Node, epoch); n != nil {
			inv.ids = append(inv.ids, n.id)
		}
	}
	if e.Kind != upstream.EvEntry {
		return
	}
	fs.cache.dropDir(e.Parent)
	fs.cache.dropAttr(e.Parent)
	parent := fs.nodes.byHost(e.Parent, epoch)
	if parent == nil {
		return
	}
	inv.ids = append(inv.ids, parent.id)
	if !singleName(e.Name) {
		return
	}
	inv.names = append(inv.names, kernelName{parent.id, e.Name})
	if child := fs.nodes.child(parent, e.Name); child != nil {
		if up, ok := fs.nodes.upOf(child, epoch); ok {
			fs.cache.dropAttr(up)
		}
		inv.ids = append(inv.ids, child.id)
	}
}

// conflict reports (and counts) a host change to something the guest
// has changes of its own for, in a delegated subtree.
func (fs *FS) conflict(e *upstream.Event, epoch uint64) bool {
	if fs.wb == nil {
		return false
	}
	n := fs.nodes.byHost(e.Node, epoch)
	if e.Kind == upstream.EvEntry {
		n = fs.nodes.byHost(e.Parent, epoch)
	}
	if !fs.ownedOrLocal(n) {
		return false
	}
	fs.wb.mu.Lock()
	fs.wb.stats.Conflicts++
	fs.wb.mu.Unlock()
	return true
}

// EventStats returns the event counters.
func (fs *FS) EventStats() EventStats { return fs.evStats.snapshot() }

var _ = invalidation.Create

package invalidation

import (
	"fmt"
	"os"
	"sync/atomic"
)

// Hub hands out TreeWatchers of the kind it chose: with Inotify each
// watcher has an inotify fd of its own, with Fanotify they all share the
// Hub's fanotify group and each filters it by its own trees.
type Hub struct {
	kind     Kind      // immutable: Inotify, Fanotify or FSEvents
	fallback string    // immutable: why Auto chose Inotify
	back     backend   // immutable: the host's mechanism (hub_linux.go, hub_darwin.go)
	c        *counters // immutable
}

// backend is a host's watching mechanism, chosen once per Hub: the
// platform split of the package. Everything above it is shared.
type backend interface {
	watcher(emit func(Change)) (TreeWatcher, error)
	close() error
}

// counters are the figures behind Stats, shared by a Hub's watchers.
type counters struct {
	trees                                           atomic.Int64
	events, filtered, overflows, restarts, resolved atomic.Uint64
	unwatchedDirs                                   atomic.Uint64
}

// NewHub chooses the watching mechanism and, for fanotify, opens the
// group (filesystems are marked when a tree on them is first watched).
func NewHub(o HubOptions) (*Hub, error) {
	h := &Hub{kind: o.Kind, c: &counters{}}
	if h.kind == Auto {
		if env := os.Getenv(EnvKind); env != "" {
			k, err := ParseKind(env)
			if err != nil {
				return nil, fmt.Errorf("$%s: %w", EnvKind, err)
			}
			h.kind = k
		}
	}
	if err := h.open(o); err != nil {
		return nil, err
	}
	return h, nil
}

// Kind returns the mechanism chosen: Inotify or Fanotify.
func (h *Hub) Kind() Kind { return h.kind }

// NewWatcher returns a watcher that calls emit with the changes under
// the trees it is given.
func (h *Hub) NewWatcher(emit func(Change)) (TreeWatcher, error) {
	return h.back.watcher(emit)
}

// Stats returns the Hub's counters.
func (h *Hub) Stats() Stats {
	c := h.c
	return Stats{Kind: h.kind, Fallback: h.fallback, Trees: c.trees.Load(), Events: c.events.Load(),
		Filtered: c.filtered.Load(), Overflows: c.overflows.Load(), Restarts: c.restarts.Load(), UnwatchedDirs: c.unwatchedDirs.Load(),
		Resolved: c.resolved.Load()}
}

// Close closes what the Hub shares among its watchers (the fanotify
// group, the FSEvents run loop). Inotify watchers handed out keep their
// fds until closed themselves.
func (h *Hub) Close() error {
	return h.back.close()
}

// ParseKind parses "auto", "inotify", "fanotify" or "fsevents".
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if s == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown watcher %q (want auto, inotify, fanotify or fsevents)", s)
}

var kindNames = [...]string{Auto: "auto", Inotify: "inotify", Fanotify: "fanotify", FSEvents: "fsevents"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind%d", k)
}

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
	kind     Kind      // immutable: Inotify or Fanotify
	fallback string    // immutable: why Auto chose Inotify
	fan      *fanGroup // immutable; nil with Inotify
	c        *counters // immutable
}

// counters are the figures behind Stats, shared by a Hub's watchers.
type counters struct {
	trees                                           atomic.Int64
	events, filtered, overflows, restarts, resolved atomic.Uint64
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
	if h.kind == Inotify {
		return h, nil
	}
	g, err := newFanGroup(o.MountFD, o.Unwatched, h.c)
	switch {
	case err == nil:
		h.kind, h.fan = Fanotify, g
		g.start()
	case h.kind == Auto:
		h.kind, h.fallback = Inotify, err.Error()
	default:
		return nil, err
	}
	return h, nil
}

// Kind returns the mechanism chosen: Inotify or Fanotify.
func (h *Hub) Kind() Kind { return h.kind }

// NewWatcher returns a watcher that calls emit with the changes under
// the trees it is given.
func (h *Hub) NewWatcher(emit func(Change)) (TreeWatcher, error) {
	if h.fan != nil {
		return h.fan.newWatcher(emit), nil
	}
	return newWatcher(emit, h.c)
}

// Stats returns the Hub's counters.
func (h *Hub) Stats() Stats {
	c := h.c
	return Stats{Kind: h.kind, Fallback: h.fallback, Trees: c.trees.Load(), Events: c.events.Load(),
		Filtered: c.filtered.Load(), Overflows: c.overflows.Load(), Restarts: c.restarts.Load(),
		Resolved: c.resolved.Load()}
}

// Close closes the fanotify group, if any. Watchers handed out keep
// their inotify fds until closed themselves.
func (h *Hub) Close() error {
	if h.fan != nil {
		return h.fan.close()
	}
	return nil
}

// ParseKind parses "auto", "inotify" or "fanotify".
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if s == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown watcher %q (want auto, inotify or fanotify)", s)
}

var kindNames = [...]string{Auto: "auto", Inotify: "inotify", Fanotify: "fanotify"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind%d", k)
}

package invalidation

import "fmt"

// open chooses between fanotify and inotify (see Kind).
func (h *Hub) open(o HubOptions) error {
	switch h.kind {
	case Inotify:
		h.back = inotifyBackend{h.c}
		return nil
	case FSEvents:
		return fmt.Errorf("watcher %v: macOS only", h.kind)
	}
	g, err := newFanGroup(o.MountFD, o.Unwatched, h.c)
	switch {
	case err == nil:
		h.kind, h.back = Fanotify, g
		g.start()
	case h.kind == Auto:
		h.kind, h.fallback, h.back = Inotify, err.Error(), inotifyBackend{h.c}
	default:
		return err
	}
	return nil
}

// inotifyBackend gives each watcher an inotify fd of its own.
type inotifyBackend struct{ c *counters }

func (b inotifyBackend) watcher(emit func(Change)) (TreeWatcher, error) {
	return newWatcher(emit, b.c)
}

func (inotifyBackend) close() error { return nil }

// watcher hands out a view of the shared group.
func (g *fanGroup) watcher(emit func(Change)) (TreeWatcher, error) {
	return g.newWatcher(emit), nil
}

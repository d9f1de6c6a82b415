//go:build linux

package upstream_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream"
)

// eventLog collects the events a client receives, acknowledging each
// batch as a guest does.
type eventLog struct {
	mu  sync.Mutex
	evs []upstream.Event
}

func (l *eventLog) wait(t *testing.T, op invalidation.Op, name string) upstream.Event {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		for _, e := range l.named(name) {
			if e.Op == uint8(op) {
				return e
			}
		}
	}
	t.Fatalf("no event %d %q; got %+v", op, name, l.named(""))
	return upstream.Event{}
}

// named returns the events of name; "" returns all.
func (l *eventLog) named(name string) []upstream.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []upstream.Event
	for _, e := range l.evs {
		if name == "" || e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// forEachWatcher runs f against a server of each watcher kind; fanotify
// skips, with the reason, where the server may not have it.
func forEachWatcher(t *testing.T, f func(t *testing.T, ts *testServer)) {
	for _, k := range []invalidation.Kind{invalidation.Inotify, invalidation.Fanotify} {
		t.Run(k.String(), func(t *testing.T) {
			opts := upstream.ServerOptions{Export: t.TempDir(), Watcher: k}
			probe, err := upstream.NewServer(opts)
			if err != nil {
				t.Skipf("no %v here: %v", k, err)
			}
			probe.Close()
			ts := startServer(t, opts)
			if got := ts.srv.Stats().Watch.Kind; got != k {
				t.Fatalf("server watches with %v, want %v", got, k)
			}
			f(t, ts)
		})
	}
}

// watchingClient connects a client that logs its events and watches the
// directory at path below the export (looked up from the root).
func watchingClient(t *testing.T, ts *testServer, path ...string) (*upstream.Client, *eventLog, uint64) {
	t.Helper()
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	l := &eventLog{}
	c.HandleEvents(func(b *upstream.EventBatch) {
		l.mu.Lock()
		l.evs = append(l.evs, b.Events...)
		l.mu.Unlock()
		try(c, upstream.OpAck, &upstream.AckReq{Seq: b.Seq}, &upstream.Empty{})
	}, nil)
	node := uint64(upstream.RootID)
	for _, name := range path {
		node = lookup(t, c, node, name).Node
	}
	must(t, c, upstream.OpWatch, &upstream.WatchReq{Node: node}, &upstream.Empty{})
	return c, l, node
}

func TestWatchEvents(t *testing.T) {
	forEachWatcher(t, func(t *testing.T, ts *testServer) {
		os.MkdirAll(filepath.Join(ts.export, "d", "e"), 0755)
		c, l, _ := watchingClient(t, ts)
		d := lookup(t, c, upstream.RootID, "d").Node
		host := filepath.Join(ts.export, "d", "f")
		os.WriteFile(host, nil, 0644)
		if e := l.wait(t, invalidation.Create, "f"); e.Kind != upstream.EvEntry || e.Parent != d {
			t.Errorf("create event %+v, want EvEntry in node %d", e, d)
		}
		f := lookup(t, c, d, "f").Node
		os.WriteFile(host, []byte("x"), 0644)
		if e := l.wait(t, invalidation.Modify, "f"); e.Kind != upstream.EvAttr || e.Node != f {
			t.Errorf("modify event %+v, want EvAttr of node %d", e, f)
		}
		os.Chmod(filepath.Join(ts.export, "d", "e"), 0700)
		if e := l.wait(t, invalidation.Attrib, "e"); e.Parent != d || !e.IsDir {
			t.Errorf("chmod of a directory: %+v, want Attrib of a directory in node %d", e, d)
		}
		lookup(t, c, d, "e") // events in directories the guest never saw are dropped
		os.Rename(host, filepath.Join(ts.export, "d", "e", "g"))
		from, to := l.wait(t, invalidation.MoveFrom, "f"), l.wait(t, invalidation.MoveTo, "g")
		if from.Cookie == 0 || from.Cookie != to.Cookie {
			t.Errorf("rename cookies %d, %d: want equal, nonzero", from.Cookie, to.Cookie)
		}
		if st := ts.srv.Stats().Watch; st.Trees != 1 || st.Events == 0 {
			t.Errorf("watch stats %+v: want one tree and events counted", st)
		}
	})
}

// TestWatchSuppressesOwnChanges checks that changes the guest makes
// through the server do not come back to it as events.
func TestWatchSuppressesOwnChanges(t *testing.T) {
	forEachWatcher(t, func(t *testing.T, ts *testServer) {
		c, l, _ := watchingClient(t, ts)
		_, h := create(t, c, upstream.RootID, "mine")
		write(t, c, h, 0, []byte("data"))
		must(t, c, upstream.OpRelease, &upstream.HandleReq{Handle: h}, &upstream.Empty{})
		mkdir(t, c, upstream.RootID, "mydir")
		os.WriteFile(filepath.Join(ts.export, "host"), nil, 0644)
		l.wait(t, invalidation.Create, "host")
		for _, name := range []string{"mine", "mydir"} {
			if evs := l.named(name); len(evs) != 0 {
				t.Errorf("the guest's own change came back: %+v", evs)
			}
		}
	})
}

// TestWatchPerSession gives two sessions a subtree each: each hears of
// its own only, though with fanotify they share one group.
func TestWatchPerSession(t *testing.T) {
	forEachWatcher(t, func(t *testing.T, ts *testServer) {
		os.Mkdir(filepath.Join(ts.export, "a"), 0755)
		os.Mkdir(filepath.Join(ts.export, "b"), 0755)
		_, la, _ := watchingClient(t, ts, "a")
		_, lb, _ := watchingClient(t, ts, "b")
		os.WriteFile(filepath.Join(ts.export, "a", "x"), nil, 0644)
		os.WriteFile(filepath.Join(ts.export, "b", "y"), nil, 0644)
		os.WriteFile(filepath.Join(ts.export, "outside"), nil, 0644)
		la.wait(t, invalidation.Create, "x")
		lb.wait(t, invalidation.Create, "y")
		if len(la.named("y"))+len(lb.named("x"))+len(la.named("outside"))+len(lb.named("outside")) != 0 {
			t.Errorf("events crossed sessions: a %+v, b %+v", la.named(""), lb.named(""))
		}
		if got := ts.srv.Stats().Watch.Trees; got != 2 {
			t.Errorf("watched trees %d, want 2", got)
		}
	})
}

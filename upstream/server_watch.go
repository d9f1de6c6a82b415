//go:build linux

package upstream

import (
	"sync"
	"time"

	"github.com/cachefs/cachefs/invalidation"
	"golang.org/x/sys/unix"
)

// Host events. A session watches the subtrees its guest asked for
// (OpWatch) through a watcher of the server's invalidation.Hub: with
// fanotify all sessions share one group and each filters it by its own
// subtrees, with inotify each session has an inotify fd of its own.
// Changes are batched, mapped to the session's node ids and pushed as
// KindEvent frames. At most maxUnacked batches go unacknowledged;
// behind that, the batcher collapses changes into subtree overflows, so
// a slow guest costs precision, never memory or replies.

const maxUnacked = 16

type sessionEvents struct {
	ss *session                 // immutable
	w  invalidation.TreeWatcher // immutable
	b  *invalidation.Batcher    // immutable

	mu     sync.Mutex // protects the following
	cond   *sync.Cond
	seq    uint64 // last batch sent
	acked  uint64
	closed bool
	self   map[selfKey]time.Time // changes the guest made, by when
}

// events returns the session's event machinery, starting it if needed.
func (ss *session) events() (*sessionEvents, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ev != nil {
		return ss.ev, nil
	}
	ev := &sessionEvents{ss: ss, self: map[selfKey]time.Time{}}
	ev.cond = sync.NewCond(&ev.mu)
	ev.b = invalidation.NewBatcher(invalidation.BatcherOptions{Send: ev.send})
	w, err := ss.srv.watchers.NewWatcher(ev.b.Add)
	if err != nil {
		ev.b.Close()
		return nil, err
	}
	ev.w = w
	ss.ev = ev
	return ev, nil
}

func (ss *session) watch(req *WatchReq, _ *Empty) error {
	ev, err := ss.events()
	if err != nil {
		return err
	}
	return ss.withNode(req.Node, func(n *node, fd int) error {
		if n.fmt != unix.S_IFDIR {
			return unix.ENOTDIR
		}
		return ev.w.AddTree(fd)
	})
}

func (ss *session) unwatch(req *WatchReq, _ *Empty) error {
	n, err := ss.nodes.get(req.Node)
	if err != nil {
		return err
	}
	ss.mu.Lock()
	ev := ss.ev
	ss.mu.Unlock()
	if ev != nil {
		ev.w.RemoveTree(n.dev, n.ino)
	}
	return nil
}

func (ss *session) ack(req *AckReq, _ *Empty) error {
	ss.mu.Lock()
	ev := ss.ev
	ss.mu.Unlock()
	if ev != nil {
		ev.mu.Lock()
		ev.acked = min(max(ev.acked, req.Seq), ev.seq)
		ev.mu.Unlock()
		ev.cond.Broadcast()
	}
	return nil
}

// send maps a batch of changes to events and pushes it to the guest,
// waiting while too many batches are unacknowledged.
func (ev *sessionEvents) send(changes []invalidation.Change, first time.Time) {
	b := &EventBatch{Time: first.UnixNano()}
	for i := range changes {
		if e, ok := ev.toEvent(&changes[i]); ok {
			b.Events = append(b.Events, e)
		}
	}
	if len(b.Events) == 0 {
		return
	}
	ev.mu.Lock()
	if ev.seq-ev.acked >= maxUnacked && !ev.waitAcks() {
		// Acks stopped coming (lost with a connection, or a stuck
		// guest): start counting afresh and make the guest drop
		// everything, since what it missed is unknown.
		ev.acked = ev.seq
		b.Events = []Event{{Kind: EvSubtree, Op: uint8(invalidation.Overflow)}}
	}
	if ev.closed {
		ev.mu.Unlock()
		return
	}
	ev.seq++
	b.Seq = ev.seq
	ev.mu.Unlock()
	ev.ss.mu.Lock()
	sc := ev.ss.conn
	ev.ss.mu.Unlock()
	if sc != nil {
		sc.SendEvents(b)
	}
}

// ackWait bounds the wait for acknowledgements.
const ackWait = 2 * time.Second

// waitAcks waits up to ackWait for the guest to catch up; it reports
// whether it did. Needs ev.mu.
func (ev *sessionEvents) waitAcks() bool {
	t := time.AfterFunc(ackWait, ev.cond.Broadcast)
	defer t.Stop()
	deadline := time.Now().Add(ackWait)
	for ev.seq-ev.acked >= maxUnacked && !ev.closed {
		if time.Now().After(deadline) {
			return false
		}
		ev.cond.Wait()
	}
	return true
}

func (ev *sessionEvents) close() {
	ev.mu.Lock()
	ev.closed = true
	ev.mu.Unlock()
	ev.cond.Broadcast()
	ev.w.Close()
	ev.b.Close()
}

// toEvent maps a change to the session's node ids. Changes in
// directories the guest never saw are dropped: it caches nothing there.
func (ev *sessionEvents) toEvent(c *invalidation.Change) (Event, bool) {
	ss := ev.ss
	if c.Op == invalidation.Overflow {
		e := Event{Kind: EvSubtree, Op: uint8(c.Op)}
		if n := ss.nodes.find(c.RootDev, c.RootIno); n != nil {
			e.Node = n.id
		}
		return e, true
	}
	dir := ss.nodes.find(c.DirDev, c.DirIno)
	if dir == nil {
		return Event{}, false
	}
	if ev.marked(selfKey{dir.id, c.Name, c.Op}) {
		return Event{}, false
	}
	e := Event{Kind: EvEntry, Op: uint8(c.Op), Parent: dir.id, Name: c.Name, IsDir: c.IsDir, Cookie: c.Cookie}
	if c.Op == invalidation.Modify || c.Op == invalidation.Attrib {
		e.Kind = EvAttr
	}
	if child := ss.childOf(dir, c.Name); child != nil {
		e.Node = child.id
	}
	return e, true
}

// childOf returns the known node that name in dir holds now, if any.
func (ss *session) childOf(dir *node, name string) *node {
	if validName(name) != nil {
		return nil
	}
	r, err := ss.nodeFD(dir)
	if err != nil {
		return nil
	}
	defer r.release()
	return ss.victim(r.fd, name)
}

// selfWindow is how long a change the guest made through this session
// suppresses the host events it causes, which the guest needs not hear
// of: it changed its caches itself. A host change of the same name and
// kind within the window is suppressed too; the cache TTL bounds that.
const selfWindow = time.Second

type selfKey struct {
	dir  uint64 // node id
	name string
	op   invalidation.Op
}

// marked reports whether the guest made this change itself recently.
func (ev *sessionEvents) marked(k selfKey) bool {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	t, ok := ev.self[k]
	return ok && time.Since(t) < selfWindow
}

// mark records changes the guest is making to name in dir, so that the
// host events they cause are not echoed back.
func (ss *session) mark(dir *node, name string, ops ...invalidation.Op) {
	ss.mu.Lock()
	ev := ss.ev
	ss.mu.Unlock()
	if ev == nil || dir == nil {
		return
	}
	now := time.Now()
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.self) > 4096 {
		for k, t := range ev.self {
			if now.Sub(t) >= selfWindow {
				delete(ev.self, k)
			}
		}
	}
	for _, op := range ops {
		ev.self[selfKey{dir.id, name, op}] = now
	}
}

// markNode is mark for a node, under the name it was last seen by.
func (ss *session) markNode(n *node, ops ...invalidation.Op) {
	if parent, name := ss.nodes.where(n); parent != nil {
		ss.mark(parent, name, ops...)
	}
}

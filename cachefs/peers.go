package cachefs

import (
	"sync"
	"sync/atomic"

	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream"
)

// Connections of one daemon. Each kernel connection (a mode's FUSE
// mount) is served by an FS of its own, with its own nodes and caches,
// over one shared upstream session. connSet joins them:
//   - every host event batch reaches each connection, and is
//     acknowledged once all have dropped what it changed;
//   - a change the guest makes through one connection reaches the others'
//     caches and kernels before that request is answered, as if the host
//     had reported it (the host does not report a session's own changes).
//
// Notifying another connection's kernel from a request handler is safe:
// that kernel's requests are answered by its own handlers, which never
// wait for this one's.

// connSet is the connections sharing one upstream client.
type connSet struct {
	mu    sync.Mutex // protects conns
	conns []*FS
}

// newConnSet starts a set whose first connection is fs, and routes the
// client's events to the set.
func newConnSet(fs *FS) *connSet {
	s := &connSet{conns: []*FS{fs}}
	fs.up.HandleEvents(s.onEvents, s.onSession)
	return s
}

func (s *connSet) add(fs *FS) {
	s.mu.Lock()
	s.conns = append(s.conns, fs)
	s.mu.Unlock()
}

// remove drops fs from the set and returns how many are left.
func (s *connSet) remove(fs *FS) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.conns {
		if c == fs {
			s.conns = append(s.conns[:i:i], s.conns[i+1:]...)
			break
		}
	}
	return len(s.conns)
}

func (s *connSet) list() []*FS {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*FS(nil), s.conns...)
}

// onEvents gives a host batch to every connection, then acknowledges it.
func (s *connSet) onEvents(b *upstream.EventBatch) {
	conns := s.list()
	for _, fs := range conns {
		fs.absorb(b, true)
	}
	if len(conns) > 0 {
		conns[0].rpc(upstream.OpAck, &upstream.AckReq{Seq: b.Seq}, &upstream.Empty{})
	}
}

func (s *connSet) onSession(resumed bool, root upstream.Entry) {
	for _, fs := range s.list() {
		fs.onSession(resumed, root)
	}
}

// changed gives the guest's own changes through from to the others.
func (s *connSet) changed(from *FS, evs []upstream.Event) {
	if s == nil || len(evs) == 0 {
		return
	}
	for _, fs := range s.list() {
		if fs != from {
			fs.absorb(&upstream.EventBatch{Events: evs}, false)
		}
	}
}

// moveCookies pair the two halves of the guest's own renames.
var moveCookies atomic.Uint32

// ownChange reports a change this connection made on the host to the
// other connections: the request says what it changed.
func (fs *FS) ownChange(op upstream.Op, req any) {
	if fs.set == nil {
		return
	}
	fs.set.changed(fs, changeEvents(op, req))
}

// changeEvents are the events a successful request op stands for.
func changeEvents(op upstream.Op, req any) []upstream.Event {
	entry := func(op invalidation.Op, parent uint64, name string) upstream.Event {
		return upstream.Event{Kind: upstream.EvEntry, Op: uint8(op), Parent: parent, Name: name}
	}
	attr := func(op invalidation.Op, node uint64) upstream.Event {
		return upstream.Event{Kind: upstream.EvAttr, Op: uint8(op), Node: node}
	}
	switch r := req.(type) {
	case *upstream.SetattrReq:
		return []upstream.Event{attr(invalidation.Attrib, r.Node)}
	case *upstream.SetxattrReq:
		return []upstream.Event{attr(invalidation.Attrib, r.Node)}
	case *upstream.XattrReq:
		if op == upstream.OpRemovexattr {
			return []upstream.Event{attr(invalidation.Attrib, r.Node)}
		}
	case *upstream.CreateReq:
		return []upstream.Event{entry(invalidation.Create, r.Parent, r.Name)}
	case *upstream.MknodReq:
		e := entry(invalidation.Create, r.Parent, r.Name)
		e.IsDir = r.Mode&sIFMT == sIFDIR
		return []upstream.Event{e}
	case *upstream.SymlinkReq:
		return []upstream.Event{entry(invalidation.Create, r.Parent, r.Name)}
	case *upstream.LinkReq:
		return []upstream.Event{entry(invalidation.Create, r.NewParent, r.NewName), attr(invalidation.Attrib, r.Node)}
	case *upstream.UnlinkReq:
		e := entry(invalidation.Delete, r.Parent, r.Name)
		e.IsDir = op == upstream.OpRmdir
		return []upstream.Event{e}
	case *upstream.RenameReq:
		if r.Flags&upstream.RenameExchange != 0 { // both names stay, each another file
			return []upstream.Event{entry(invalidation.Attrib, r.Parent, r.Name), entry(invalidation.Attrib, r.NewParent, r.NewName)}
		}
		c := moveCookies.Add(1)
		from, to := entry(invalidation.MoveFrom, r.Parent, r.Name), entry(invalidation.MoveTo, r.NewParent, r.NewName)
		from.Cookie, to.Cookie = c, c
		return []upstream.Event{from, to}
	}
	return nil
}

// nodeWritten reports a write to host node up to the other connections.
func (fs *FS) nodeWritten(up uint64) {
	if fs.set != nil {
		fs.set.changed(fs, []upstream.Event{{Kind: upstream.EvAttr, Op: uint8(invalidation.Modify), Node: up}})
	}
}

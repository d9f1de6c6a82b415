package cachefs

import (
	"strings"
	"sync"

	"github.com/cachefs/cachefs/upstream"
)

// The host watches what the guest registered: each registration's
// subtree (and the whole export when the default mode caches), so host
// changes arrive as events.

// watchSet maps registrations to the pinned nodes the host watches.
type watchSet struct {
	mu    sync.Mutex // protects byReg
	byReg map[uint64]*node
}

// watchDefault watches the export root when unregistered paths cache.
func (fs *FS) watchDefault() {
	if fs.policy.ModeFor("").MayCacheAttrs() {
		fs.watchNode(fs.nodes.get(rootID))
	}
}

// watchRegistration asks the host to watch a registered subtree.
func (fs *FS) watchRegistration(id uint64, path string) error {
	n, err := fs.resolve(path)
	if err != nil {
		return err
	}
	fs.watches.mu.Lock()
	if fs.watches.byReg[id] != nil {
		fs.watches.mu.Unlock()
		fs.unpin(n)
		return nil
	}
	fs.watches.byReg[id] = n
	fs.watches.mu.Unlock()
	return fs.watchNode(n)
}

func (fs *FS) watchNode(n *node) error {
	st := fs.call(func(epoch uint64) error {
		up, err := fs.upID(n, epoch)
		if err != nil {
			return err
		}
		return fs.rpc(upstream.OpWatch, &upstream.WatchReq{Node: up}, &upstream.Empty{})
	})
	return fs.status2err(st)
}

// unwatchRegistration stops watching a registration that is gone.
func (fs *FS) unwatchRegistration(id uint64) {
	fs.watches.mu.Lock()
	n := fs.watches.byReg[id]
	delete(fs.watches.byReg, id)
	fs.watches.mu.Unlock()
	if n == nil {
		return
	}
	fs.call(func(epoch uint64) error {
		up, err := fs.upID(n, epoch)
		if err != nil {
			return err
		}
		return fs.rpc(upstream.OpUnwatch, &upstream.WatchReq{Node: up}, &upstream.Empty{})
	})
	fs.unpin(n)
}

// rewatch asks a new host session to watch everything again.
func (fs *FS) rewatch() {
	fs.watchDefault()
	fs.watches.mu.Lock()
	nodes := make([]*node, 0, len(fs.watches.byReg))
	for _, n := range fs.watches.byReg {
		nodes = append(nodes, n)
	}
	fs.watches.mu.Unlock()
	for _, n := range nodes {
		fs.watchNode(n)
	}
}

// onSession runs after a reconnect: events may have been missed, so
// every cache goes; a new host session also lost the watches.
func (fs *FS) onSession(resumed bool, _ upstream.Entry) {
	go func() {
		fs.invalidateAll()
		if !resumed {
			fs.rewatch()
		}
	}()
}

// resolve finds the node of a clean path, pinned for the caller.
func (fs *FS) resolve(path string) (*node, error) {
	n := fs.nodes.get(rootID)
	fs.nodes.pin(n)
	if path == "" {
		return n, nil
	}
	for _, name := range strings.Split(path, "/") {
		var next *node
		st := fs.call(func(epoch uint64) error {
			pup, err := fs.upID(n, epoch)
			if err != nil {
				return err
			}
			var resp upstream.EntryResp
			if err := fs.rpc(upstream.OpLookup, &upstream.LookupReq{Parent: pup, Name: name}, &resp); err != nil {
				return err
			}
			next = fs.nodes.adopt(n, name, resp.Entry.Node, epoch, &resp.Entry.Attr)
			return nil
		})
		fs.unpin(n)
		if !st.Ok() {
			return nil, fs.status2err(st)
		}
		n = next
	}
	return n, nil
}

package cachefs

import (
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// Raising inotify events in the guest for host changes. The kernel only
// raises inotify events for syscalls, so the actuator thread performs a
// harmless one on the path through the mount, and the filesystem answers
// the requests it causes itself (see actuator_ops.go): nothing of it
// reaches or alters the host.

// opMove is a MoveFrom paired with its MoveTo: one rename.
const opMove = invalidation.Op(100)

// actuation is one inotify event to raise.
type actuation struct {
	op        invalidation.Op
	parent    *node // nil when the guest does not know the directory
	name      string
	isDir     bool
	cookie    uint32
	node      *node // Modify, Attrib: the node, if the guest knows it
	newParent *node // opMove
	newName   string
}

func (fs *FS) actuationFor(e *upstream.Event, epoch uint64) actuation {
	a := actuation{op: invalidation.Op(e.Op), name: e.Name, isDir: e.IsDir, cookie: e.Cookie,
		parent: fs.nodes.byHost(e.Parent, epoch)}
	if e.Node != 0 {
		a.node = fs.nodes.byHost(e.Node, epoch)
	}
	return a
}

// pairMoves joins each MoveFrom to the MoveTo of the same cookie; a move
// whose other half is missing becomes a delete or a create.
func pairMoves(acts []actuation) []actuation {
	var out []actuation
	from := map[uint32]int{}
	for _, a := range acts {
		switch a.op {
		case invalidation.MoveFrom:
			from[a.cookie] = len(out)
			a.op = invalidation.Delete
		case invalidation.MoveTo:
			if i, ok := from[a.cookie]; ok {
				delete(from, a.cookie)
				out[i].op, out[i].newParent, out[i].newName = opMove, a.parent, a.name
				continue
			}
			a.op = invalidation.Create
		}
		out = append(out, a)
	}
	return out
}

// actPend is what the actuator's next request about a name expects.
type actPend struct {
	absent bool            // the name must look absent (a create's or rename's target)
	entry  *upstream.Entry // Create: the host's entry, holding one host reference
	isDir  bool            // names that must look present but are gone on the host
}

// actPending holds the expectations of the actuation under way.
type actPending struct {
	mu sync.Mutex // protects m
	m  map[kernelName]actPend
}

func (p *actPending) set(k kernelName, v actPend) {
	p.mu.Lock()
	p.m[k] = v
	p.mu.Unlock()
}

func (p *actPending) take(k kernelName) (actPend, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[k]
	delete(p.m, k)
	return v, ok
}

func (p *actPending) peek(k kernelName) (actPend, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[k]
	return v, ok
}

// actBatch is a batch of actuations of one host session.
type actBatch struct {
	acts  []actuation
	epoch uint64
}

// queueActuations hands acts to the actuation goroutine without waiting:
// raising inotify events must not hold up applying the next batch.
// When it is too far behind, they are dropped and counted.
func (fs *FS) queueActuations(acts []actuation, epoch uint64) {
	if fs.act == nil || len(acts) == 0 {
		return
	}
	select {
	case fs.actQueue <- actBatch{acts, epoch}:
	default:
		fs.evStats.add(func(s *EventStats) { s.ActuateDropped += uint64(len(acts)) })
	}
}

func (fs *FS) runActuations() {
	defer close(fs.actDone)
	for {
		select {
		case b := <-fs.actQueue:
			fs.actuate(b.acts, b.epoch)
		case <-fs.actStop:
			return
		}
	}
}

// actuate raises the events of acts, one syscall each.
func (fs *FS) actuate(acts []actuation, epoch uint64) {
	if fs.act == nil {
		return
	}
	for i := range acts {
		a := &acts[i]
		if fs.ownedOrLocal(a.parent) {
			continue // a conflict: the guest's view stands, nothing changed in it
		}
		if !fs.nodes.inKernel(a.parent) {
			continue // no inotify watch can be on a directory the kernel does not hold
		}
		if !singleName(a.name) || (a.op == opMove && !singleName(a.newName)) {
			continue // the host names one entry of a directory, nothing else
		}
		dir, ok := fs.guestPath(a.parent)
		if !ok {
			continue
		}
		err := fs.actuateOne(a, filepath.Join(dir, a.name), epoch)
		fs.evStats.add(func(s *EventStats) {
			if err != nil {
				s.ActuateErrors++
			} else {
				s.Actuated++
			}
		})
	}
}

func (fs *FS) actuateOne(a *actuation, p string, epoch uint64) error {
	if fs.overlayCovers(p) {
		return nil
	}
	key := kernelName{a.parent.id, a.name}
	switch a.op {
	case invalidation.Modify, invalidation.Attrib:
		return fs.actuateAttr(a, p, epoch)
	case invalidation.Create:
		return fs.actuateCreate(a, key, p, epoch)
	case invalidation.Delete:
		fs.actPending.set(key, actPend{isDir: a.isDir})
		defer fs.actPending.take(key)
		return fs.act.Run(func() error {
			if a.isDir {
				return unix.Rmdir(p)
			}
			return unix.Unlink(p)
		})
	case opMove:
		if fs.nodes.child(a.parent, a.name) == nil && fs.nodes.child(a.newParent, a.newName) != nil {
			return nil // the guest has the result already: its own rename, echoed
		}
		to, ok := fs.guestPath(a.newParent)
		if !ok {
			return syscall.ENOENT
		}
		toKey := kernelName{a.newParent.id, a.newName}
		fs.actPending.set(key, actPend{isDir: a.isDir})
		fs.actPending.set(toKey, actPend{absent: true})
		defer fs.actPending.take(key)
		defer fs.actPending.take(toKey)
		return fs.act.Run(func() error { return unix.Rename(p, filepath.Join(to, a.newName)) })
	}
	return nil
}

// actuateAttr raises IN_MODIFY by truncating to the current size, or
// IN_ATTRIB by chmod to the current mode.
func (fs *FS) actuateAttr(a *actuation, p string, epoch uint64) error {
	a2, err := fs.hostAttr(a, epoch)
	if err != nil {
		return err
	}
	if a.op == invalidation.Modify && a2.Mode&sIFMT == sIFREG {
		return fs.act.Run(func() error { return unix.Truncate(p, int64(a2.Size)) })
	}
	if a2.Mode&sIFMT == sIFLNK {
		return nil // a symlink's mode cannot be set
	}
	return fs.act.Run(func() error { return unix.Chmod(p, a2.Mode&07777) })
}

// hostAttr returns the host's attributes of the actuation's name.
func (fs *FS) hostAttr(a *actuation, epoch uint64) (upstream.Attr, error) {
	if a.node != nil {
		if up, ok := fs.nodes.upOf(a.node, epoch); ok {
			var resp upstream.AttrResp
			err := fs.rpc(upstream.OpGetattr, &upstream.NodeReq{Node: up}, &resp)
			return resp.Attr, err
		}
	}
	pup, err := fs.upID(a.parent, epoch)
	if err != nil {
		return upstream.Attr{}, err
	}
	var resp upstream.EntryResp
	if err := fs.rpc(upstream.OpLookup, &upstream.LookupReq{Parent: pup, Name: a.name}, &resp); err != nil {
		return upstream.Attr{}, err
	}
	fs.forgets.add(resp.Entry.Node, epoch, 1)
	return resp.Entry.Attr, nil
}

// actuateCreate makes the name through the mount with the type the
// host's file has; the filesystem answers with the host's entry.
func (fs *FS) actuateCreate(a *actuation, key kernelName, p string, epoch uint64) error {
	pup, err := fs.upID(a.parent, epoch)
	if err != nil {
		return err
	}
	var resp upstream.EntryResp
	if err := fs.rpc(upstream.OpLookup, &upstream.LookupReq{Parent: pup, Name: a.name}, &resp); err != nil {
		return err // gone again
	}
	e := resp.Entry
	fs.actPending.set(key, actPend{absent: true, entry: &e})
	err = fs.act.Run(func() error {
		m := e.Attr.Mode
		switch m & sIFMT {
		case sIFDIR:
			return unix.Mkdir(p, m&07777)
		case sIFLNK:
			return unix.Symlink("?", p)
		}
		return unix.Mknod(p, m, int(e.Attr.Rdev))
	})
	if left, ok := fs.actPending.take(key); ok && left.entry != nil {
		fs.forgets.add(left.entry.Node, epoch, 1) // the kernel never asked
	}
	return err
}

// guestPath returns n's path through the mount: its actuation root if
// set (a view of this connection no bind covers: a path under the
// mountpoint may lead into another connection, which would take the
// actuator's calls for real ones), else the mountpoint.
func (fs *FS) guestPath(n *node) (string, bool) {
	root, _ := fs.mounted.Load().(string) // opts.Mountpoint, written by serve while this runs
	if r, ok := fs.actRoot.Load().(string); ok {
		root = r
	}
	if n == nil || root == "" {
		return "", false
	}
	fs.nodes.mu.Lock()
	p, ok := fs.nodes.pathLocked(n)
	fs.nodes.mu.Unlock()
	return filepath.Join(root, p), ok
}

// singleName reports whether name is one path component.
func singleName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

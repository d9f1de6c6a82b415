package cachefs

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Delegated subtrees: the guest is authoritative. Changes complete
// against the guest's own state and are journaled for write-back
// (writeback.go). A directory the guest changed is owned: its listing
// is the guest's (children) and no longer follows the host. A file the
// guest wrote has a staging copy that reads and writes use until the
// host has it. Operations the guest does not model (hard links, xattrs,
// locks, fallocate) first wait for the write-back, then go to the host.

// local is a delegated node's guest-side state. writeback.mu protects it.
type local struct {
	attr     upstream.Attr    // authoritative attributes
	staging  string           // regular files: contents, relative to the state dir
	target   string           // symlinks
	children map[string]*node // owned directories: the listing; each child pinned
	// listing is children as directory handles are served them, made by
	// the first open after a change (dListing) and shared until the next.
	listing *dirSnap
	opens   int   // local handles on the staging file
	charged int64 // bytes of staging counted in writeback.staged (chargeLocked)
	pending int   // queued records that hold this state

	// Passthrough (passthrough.go): the kernel's backing id for staging
	// while ptOpens passthrough handles are open, and the staging file as
	// last seen (valid if seenValid).
	backing   int32
	ptOpens   int
	seen      stamp
	seenValid bool

	// ready is staging open already (staging_ready.go), for the handle of
	// the create that made the file; openLocalLocked takes it.
	ready *os.File
}

// delegated reports whether changes under n complete in the guest. A
// node the guest holds state for stays the guest's once it has no name
// left (a file unlinked while open): no path tells its mode any more.
func (fs *FS) delegated(n *node) bool {
	if fs.wb == nil {
		return false
	}
	if fs.modeOf(n).WritesBack() {
		return true
	}
	_, named := fs.nodes.path(n)
	return !named && fs.ownedOrLocal(n)
}

// localAttr returns n's authoritative attributes if the guest has them.
func (fs *FS) localAttr(n *node) (upstream.Attr, bool) {
	if fs.wb == nil {
		return upstream.Attr{}, false
	}
	fs.wb.mu.Lock()
	defer fs.wb.mu.Unlock()
	if n.local == nil {
		return upstream.Attr{}, false
	}
	fs.wb.refreshLocked(n)
	return n.local.attr, true
}

// own makes dir's listing the guest's, loading it from the host the
// first time. It returns with w.mu held on success, released on error.
func (fs *FS) own(dir *node) error {
	w := fs.wb
	w.mu.Lock()
	if dir.local != nil && dir.local.children != nil {
		return nil
	}
	w.mu.Unlock()
	gen := fs.cache.fence(fs.up.Epoch())
	names, nodes, attrs, dattr, err := fs.hostListing(dir)
	w.mu.Lock()
	if err != nil {
		w.mu.Unlock()
		return err
	}
	if dir.local != nil && dir.local.children != nil { // raced with another owner
		for _, n := range nodes {
			fs.unpin(n)
		}
		return nil
	}
	if dir.local == nil {
		dir.local = &local{attr: dattr}
	}
	dir.local.dropListing(fs.unpin)
	w.owning.Store(true)
	dir.local.children = map[string]*node{}
	for i, name := range names {
		dir.local.children[name] = nodes[i]
		fs.cache.putAttr(fs.up.Epoch(), nodes[i].up, gen, &attrs[i])
	}
	return nil
}

// hostListing reads a directory whole from the host, with a pinned node
// per entry.
func (fs *FS) hostListing(dir *node) ([]string, []*node, []upstream.Attr, upstream.Attr, error) {
	var names []string
	var nodes []*node
	var attrs []upstream.Attr
	var dattr upstream.Attr
	st := fs.call(func(epoch uint64) error {
		up, err := fs.upID(dir, epoch)
		if err != nil {
			return err
		}
		var ar upstream.AttrResp
		if err := fs.rpc(upstream.OpGetattr, &upstream.NodeReq{Node: up}, &ar); err != nil {
			return err
		}
		dattr = ar.Attr
		var oh upstream.OpenResp
		if err := fs.rpc(upstream.OpOpendir, &upstream.NodeReq{Node: up}, &oh); err != nil {
			return err
		}
		defer fs.rpc(upstream.OpReleasedir, &upstream.HandleReq{Handle: oh.Handle}, &upstream.Empty{})
		for off := uint64(0); ; {
			var rr upstream.ReaddirResp
			if err := fs.rpc(upstream.OpReaddir, &upstream.ReaddirReq{Handle: oh.Handle, Offset: off, Max: 4096, Plus: true}, &rr); err != nil {
				return err
			}
			for _, e := range rr.Entries {
				off = e.Off
				if e.Entry.Node == 0 {
					continue
				}
				names = append(names, e.Name)
				nodes = append(nodes, fs.nodes.adopt(dir, e.Name, e.Entry.Node, epoch, &e.Entry.Attr))
				attrs = append(attrs, e.Entry.Attr)
			}
			if rr.EOF || len(rr.Entries) == 0 {
				return nil
			}
		}
	})
	return names, nodes, attrs, dattr, fs.status2err(st)
}

// childPath is the path of name in dir.
func (fs *FS) childPath(dir *node, name string) (string, bool) {
	p, ok := fs.nodes.path(dir)
	if !ok {
		return "", false
	}
	if p == "" {
		return name, true
	}
	return p + "/" + name, true
}

// nowNs is the time stamps of local changes.
func nowNs() int64 { return time.Now().UnixNano() }

// localIno numbers nodes the host has not seen: the high bits keep them
// apart from host inode numbers.
func localIno(n *node) uint64 { return 1<<62 | n.id }

// dLookup answers a lookup in an owned directory. ok is false when the
// directory is not owned: the caller asks as usual.
func (fs *FS) dLookup(parent *node, name string, out *fuse.EntryOut) (fuse.Status, bool) {
	w := fs.wb
	if !w.owning.Load() {
		return fuse.OK, false
	}
	w.mu.Lock()
	if parent.local == nil || parent.local.children == nil {
		w.mu.Unlock()
		return fuse.OK, false
	}
	n := parent.local.children[name]
	w.mu.Unlock()
	if len(name) > 255 {
		return fuse.Status(syscall.ENAMETOOLONG), true
	}
	if n == nil {
		fs.negativeEntry(parent, out)
		return fuse.OK, true
	}
	a, err := fs.attrOf(n)
	if err != nil {
		return fs.status(err), true
	}
	fs.nodes.kernelRef(n, parent, name)
	fs.fillEntry(out, n, &a)
	return fuse.OK, true
}

// attrOf returns n's attributes: its own if local, else the host's.
func (fs *FS) attrOf(n *node) (upstream.Attr, error) {
	if a, ok := fs.localAttr(n); ok {
		return a, nil
	}
	var a upstream.Attr
	st := fs.call(func(epoch uint64) error {
		up, err := fs.upID(n, epoch)
		if err != nil {
			return err
		}
		if c, ok := fs.cache.attr(epoch, up); ok {
			a = c
			return nil
		}
		gen := fs.cache.fence(epoch)
		var resp upstream.AttrResp
		err = fs.rpc(upstream.OpGetattr, &upstream.NodeReq{Node: up}, &resp)
		a = resp.Attr
		if err == nil {
			fs.cache.putAttr(epoch, up, gen, &a)
		}
		return err
	})
	return a, fs.status2err(st)
}

// dCreate makes a file, directory or symlink in an owned directory.
// With opening, a regular file is counted as open already, so that its
// local state stays until the caller's handle holds it.
func (fs *FS) dCreate(parent *node, name string, mode uint32, target string, c upstream.Caller, out *fuse.EntryOut, opening bool) (*node, fuse.Status) {
	if len(name) > 255 {
		return nil, fuse.Status(syscall.ENAMETOOLONG)
	}
	if upstream.Parked(name) {
		return nil, fuse.Status(syscall.EPERM) // the host's own name: it would be hidden there
	}
	if err := fs.own(parent); err != nil {
		return nil, fs.status(err)
	}
	w := fs.wb
	defer w.mu.Unlock()
	if parent.local.children[name] != nil {
		return nil, fuse.Status(syscall.EEXIST)
	}
	p, ok := fs.childPath(parent, name)
	if !ok {
		return nil, fuse.Status(syscall.ESTALE)
	}
	if err := w.roomLocked(); err != nil {
		return nil, fs.status(err)
	}
	var staging string
	var ready *os.File
	if t := mode & sIFMT; t != sIFDIR && t != sIFLNK {
		if r, ok := w.takeReadyLocked(); ok && opening {
			staging, ready = r.name, r.f
			w.stats.ReadyCreates++
		} else if ok {
			r.f.Close()
			staging = r.name
		} else {
			var err error
			if staging, err = w.stageLocked(nil); err != nil {
				return nil, fs.status(err)
			}
		}
	}
	if pa := parent.local.attr; pa.Mode&syscall.S_ISGID != 0 {
		c.Gid = pa.Gid // a setgid directory gives its group, and to subdirectories the bit
		if mode&sIFMT == sIFDIR {
			mode |= syscall.S_ISGID
		}
	}
	n := fs.nodes.addLocal(parent, name, mode)
	fs.nodes.pin(n)
	now := nowNs()
	l := &local{target: target, attr: upstream.Attr{Ino: localIno(n), Mode: mode, Nlink: 1,
		Uid: c.Uid, Gid: c.Gid, Atime: now, Mtime: now, Ctime: now, Blksize: 4096}}
	op := upstream.WBOp{Path: p, Mode: mode, Uid: c.Uid, Gid: c.Gid, Target: target}
	switch mode & sIFMT {
	case sIFDIR:
		fs.wb.owning.Store(true)
		l.children, l.attr.Nlink, l.attr.Size, op.Kind = map[string]*node{}, 2, 4096, upstream.WBMkdir
	case sIFLNK:
		l.attr.Size, op.Kind = uint64(len(target)), upstream.WBSymlink
		// Its times are set on the host with it: nothing else writes a
		// symlink, and it would keep the write-back's time.
		op.Atime, op.Mtime, op.Valid = now, now, upstream.SetAtime|upstream.SetMtime
	case sIFREG:
		l.staging, l.ready, op.Kind = staging, ready, upstream.WBCreate
		if opening {
			l.opens = 1 // the write at its close sets its times on the host
		} else { // mknod: nothing else sets them
			op.Atime, op.Mtime, op.Valid = now, now, upstream.SetAtime|upstream.SetMtime
		}
	default:
		l.staging, l.ready, op.Kind = staging, ready, upstream.WBCreate
		if opening {
			l.opens = 1
		}
	}
	n.local = l
	parent.local.children[name] = n
	fs.touchLocked(parent, mode&sIFMT == sIFDIR, 1)
	w.addLocked(op, "", n, parent)
	fs.fillEntry(out, n, &l.attr)
	return n, fuse.OK
}

// touchLocked updates a directory's times (and link count) after a
// change in it. Needs w.mu.
func (fs *FS) touchLocked(dir *node, subdir bool, links int) {
	if dir.local == nil {
		return
	}
	dir.local.dropListing(fs.unpin)
	now := nowNs()
	dir.local.attr.Mtime, dir.local.attr.Ctime = now, now
	if subdir {
		dir.local.attr.Nlink = uint32(int(dir.local.attr.Nlink) + links)
	}
}

// localizeChild gives the node name in dir (if any) guest-side state, so
// that its link count can drop in the guest.
func (fs *FS) localizeChild(dir *node, name string) {
	if fs.own(dir) != nil {
		return
	}
	c := dir.local.children[name]
	fs.wb.mu.Unlock()
	if c != nil && fs.localize(c, len(fs.handles.lazyOf(c)) > 0) == nil {
		fs.wb.mu.Unlock()
	}
}

// dRemove unlinks or rmdirs a name of an owned directory.
func (fs *FS) dRemove(parent *node, name string, dir bool) fuse.Status {
	fs.localizeChild(parent, name)
	if err := fs.own(parent); err != nil {
		return fs.status(err)
	}
	w := fs.wb
	n := parent.local.children[name]
	if n == nil {
		w.mu.Unlock()
		return fuse.ENOENT
	}
	if dir {
		w.mu.Unlock()
		if err := fs.own(n); err != nil {
			return fs.status(err)
		}
		if len(n.local.children) > 0 {
			w.mu.Unlock()
			return fuse.Status(syscall.ENOTEMPTY)
		}
	}
	defer w.mu.Unlock()
	if parent.local.children[name] != n { // changed while unlocked
		return fuse.Status(syscall.EAGAIN)
	}
	p, _ := fs.childPath(parent, name)
	if err := w.roomLocked(); err != nil {
		return fs.status(err)
	}
	kind := upstream.WBUnlink
	if dir {
		kind = upstream.WBRmdir
	}
	delete(parent.local.children, name)
	fs.touchLocked(parent, dir, -1)
	if n.local != nil && n.local.attr.Nlink > 0 {
		n.local.attr.Nlink--
		if dir {
			n.local.attr.Nlink = 0 // its "." went with it
		}
		n.local.attr.Ctime = nowNs()
	}
	w.addLocked(upstream.WBOp{Kind: kind, Path: p}, "", nil, parent)
	fs.nodes.removed(parent, name)
	fs.unlinkedLocked(n, parent)
	fs.unpin(n)
	return fuse.OK
}

// dRename moves a name between owned directories.
func (fs *FS) dRename(parent *node, name string, newParent *node, newName string, flags uint32) fuse.Status {
	if flags&upstream.RenameExchange != 0 {
		return fuse.ENOSYS
	}
	if upstream.Parked(newName) {
		return fuse.Status(syscall.EPERM) // as dCreate
	}
	fs.localizeChild(newParent, newName)
	if err := fs.own(newParent); err != nil {
		return fs.status(err)
	}
	fs.wb.mu.Unlock()
	if err := fs.own(parent); err != nil {
		return fs.status(err)
	}
	w := fs.wb
	defer w.mu.Unlock()
	n := parent.local.children[name]
	if n == nil {
		return fuse.ENOENT
	}
	old := newParent.local.children[newName]
	if old != nil && flags&upstream.RenameNoReplace != 0 {
		return fuse.Status(syscall.EEXIST)
	}
	if old != nil && old.mode == sIFDIR && old.local != nil && len(old.local.children) > 0 {
		return fuse.Status(syscall.ENOTEMPTY)
	}
	if err := w.roomLocked(); err != nil {
		return fs.status(err)
	}
	from, _ := fs.childPath(parent, name)
	to, _ := fs.childPath(newParent, newName)
	delete(parent.local.children, name)
	newParent.local.children[newName] = n
	isDir := n.mode == sIFDIR
	fs.touchLocked(parent, isDir, -1)
	fs.touchLocked(newParent, isDir, 1)
	w.addLocked(upstream.WBOp{Kind: upstream.WBRename, Path: from, Path2: to, Flags: flags}, "", nil, parent, newParent)
	fs.nodes.moved(parent, name, newParent, newName)
	fs.movedLocked(n, newParent, newName)
	if old != nil {
		if old.local != nil && old.local.attr.Nlink > 0 {
			old.local.attr.Nlink--
			old.local.attr.Ctime = nowNs()
		}
		fs.unlinkedLocked(old, newParent)
		fs.unpin(old)
	}
	return fuse.OK
}

// localize gives a host node of a delegated subtree guest-side state,
// copying its attributes (and, with contents, its data) from the host.
// Returns with w.mu held on success.
func (fs *FS) localize(n *node, contents bool) error {
	w := fs.wb
	w.mu.Lock()
	if n.local != nil && (!contents || n.local.staging != "" || n.mode != sIFREG) {
		return nil
	}
	w.mu.Unlock()
	a, err := fs.attrOf(n)
	if err != nil {
		return err
	}
	staging := ""
	if contents && n.mode == sIFREG {
		if staging, err = fs.fetchStaging(n, a.Size); err != nil {
			return err // no partial copy: it would be written back as the file
		}
	}
	w.mu.Lock()
	if n.local == nil {
		n.local = &local{attr: a}
	}
	if staging != "" {
		if n.local.staging != "" { // raced with another copy
			w.recycleLocked(staging)
			return nil
		}
		n.local.staging = staging
		w.seenLocked(n, nil)
	}
	return nil
}

// dSetattr changes a delegated node's attributes in the guest.
func (fs *FS) dSetattr(n *node, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	resize := in.Valid&fuse.FATTR_SIZE != 0
	if err := fs.localize(n, resize); err != nil {
		return fs.status(err)
	}
	w := fs.wb
	defer w.mu.Unlock()
	if err := w.roomLocked(); err != nil {
		return fs.status(err)
	}
	// Writes passed through before this change (their release may come
	// after it: FUSE sends RELEASE asynchronously) are taken in first,
	// so that they cannot override the times set here.
	w.refreshLocked(n)
	if in.Valid&setattrBits == 0 {
		return fs.dKillPrivsLocked(n, in, out)
	}
	req := setattrReq(in, 0)
	l := &n.local.attr
	now := nowNs()
	if req.Valid&upstream.SetMode != 0 {
		l.Mode = l.Mode&sIFMT | req.Mode&07777
	}
	if req.Valid&upstream.SetUid != 0 {
		l.Uid = req.Uid
	}
	if req.Valid&upstream.SetGid != 0 {
		l.Gid = req.Gid
	}
	if req.Valid&(upstream.SetUid|upstream.SetGid|upstream.SetKillSuidgid) != 0 && l.Mode&sIFMT == sIFREG {
		// As Linux: a change of owner drops set-user-id, and set-group-id
		// where group execution makes it mean something.
		l.Mode &^= syscall.S_ISUID
		if l.Mode&syscall.S_IXGRP != 0 {
			l.Mode &^= syscall.S_ISGID
		}
		req.Valid |= upstream.SetMode
	}
	if resize {
		w.refreshLocked(n)
		if err := os.Truncate(filepath.Join(w.dir, n.local.staging), int64(req.Size)); err != nil {
			return fs.status(err)
		}
		l.Size, l.Mtime = req.Size, now
		w.seenLocked(n, nil)
	}
	l.Atime = pickTime(req.Valid, upstream.SetAtime, upstream.SetAtimeNow, req.Atime, l.Atime, now)
	l.Mtime = pickTime(req.Valid, upstream.SetMtime, upstream.SetMtimeNow, req.Mtime, l.Mtime, now)
	l.Ctime = now
	if p, ok := fs.nodes.path(n); ok {
		op := upstream.WBOp{Kind: upstream.WBSetattr, Path: p, Mode: l.Mode, Uid: l.Uid, Gid: l.Gid,
			Size: l.Size, Atime: l.Atime, Mtime: l.Mtime, Valid: req.Valid &^ (upstream.SetAtimeNow | upstream.SetMtimeNow)}
		if req.Valid&upstream.SetAtimeNow != 0 {
			op.Valid |= upstream.SetAtime
		}
		if req.Valid&upstream.SetMtimeNow != 0 || resize {
			op.Valid |= upstream.SetMtime // truncate(2) asks for no time: the size change sets it
		}
		w.addLocked(op, "", n)
	}
	fs.fillAttr(out, n, l)
	return fuse.OK
}

func pickTime(valid, set, now uint32, v, old, t int64) int64 {
	switch {
	case valid&now != 0:
		return t
	case valid&set != 0:
		return v
	}
	return old
}

// dListing returns an owned directory's listing for a directory handle.
func (fs *FS) dListing(dir *node) (*dirSnap, bool) {
	w := fs.wb
	w.mu.Lock()
	defer w.mu.Unlock()
	l := dir.local
	if l == nil || l.children == nil {
		return nil, false
	}
	if l.listing == nil {
		l.listing = fs.newLocalListingLocked(dir)
	}
	l.listing.refs.Add(1)
	return l.listing, true
}

// newLocalListingLocked makes an owned directory's listing, sorted by
// name, with its nodes pinned and held once (by dir.local). Needs w.mu.
func (fs *FS) newLocalListingLocked(dir *node) *dirSnap {
	l := dir.local
	names := make([]string, 0, len(l.children)+2)
	for name := range l.children {
		names = append(names, name)
	}
	slices.Sort(names)
	names = append([]string{".", ".."}, names...)
	ents := make([]dentry, len(names))
	ents[0] = dentry{attr: upstream.Attr{Mode: sIFDIR, Ino: l.attr.Ino}}
	ents[1] = dentry{attr: upstream.Attr{Mode: sIFDIR}}
	for i, name := range names[2:] {
		n := l.children[name]
		ents[i+2] = dentry{node: n, attr: upstream.Attr{Mode: n.mode, Ino: fs.nodes.inoOf(n)}}
	}
	return newDirSnap(names, ents, fs.nodes.pin)
}

// delegatedDir returns the request's directory node if changes in it
// complete in the guest.
func (fs *FS) delegatedDir(h *fuse.InHeader) *node {
	if fs.wb == nil {
		return nil
	}
	if n := fs.nodes.get(h.NodeId); n != nil && fs.delegated(n) {
		return n
	}
	return nil
}

// writeBackFirst waits until the host has every change made so far, for
// operations the guest sends to the host as they are.
func (fs *FS) writeBackFirst() {
	if failed := fs.wb.wait(); len(failed) > 0 {
		fs.opts.Logf("cachefs: %d changes failed to write back", len(failed))
	}
}

// adoptCreated adds a name the host just made in an owned directory to
// its listing; a new link also counts in the node's own attributes.
func (fs *FS) adoptCreated(dir *node, name string, out *fuse.EntryOut) {
	n := fs.nodes.get(out.NodeId)
	if n == nil || out.NodeId == 0 {
		return
	}
	w := fs.wb
	w.mu.Lock()
	defer w.mu.Unlock()
	if n.local != nil && n.mode != sIFDIR {
		n.local.attr.Nlink = out.Attr.Nlink
		n.local.attr.Ctime = nowNs()
	}
	if dir.local != nil && dir.local.children != nil && dir.local.children[name] == nil {
		fs.nodes.pin(n)
		dir.local.children[name] = n
	}
	fs.touchLocked(dir, false, 0)
}

// disown returns directories' listings to the host after a change the
// guest did not model; everything was written back before.
func (fs *FS) disown(dirs ...*node) {
	w := fs.wb
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range dirs {
		if d.local == nil {
			continue
		}
		for _, c := range d.local.children {
			fs.unpin(c)
		}
		d.local.dropListing(fs.unpin)
		d.local = nil
	}
}

// ownedOrLocal reports whether the guest, not the host, is authoritative
// for n: host events about it are conflicts, and the guest wins.
func (fs *FS) ownedOrLocal(n *node) bool {
	if fs.wb == nil || n == nil {
		return false
	}
	fs.wb.mu.Lock()
	defer fs.wb.mu.Unlock()
	return n.local != nil
}

// WriteBack waits until every change made in delegated subtrees is on
// the host and returns those that failed.
func (fs *FS) WriteBack() []Failure {
	failed := fs.flushOverlays()
	if fs.wb == nil {
		return failed
	}
	fs.wb.sync()
	return append(failed, fs.wb.standing()...)
}

// dropLocal gives back to the host the nodes that are no longer in a
// delegated subtree after a policy change; their changes were written
// back before. Files still open keep their staging copy until closed.
func (fs *FS) dropLocal() {
	if fs.wb == nil {
		return
	}
	fs.nodes.mu.Lock()
	nodes := make([]*node, 0, len(fs.nodes.byID))
	for _, n := range fs.nodes.byID {
		nodes = append(nodes, n)
	}
	fs.nodes.mu.Unlock()
	for _, n := range nodes {
		if fs.ownedOrLocal(n) && !fs.modeOf(n).WritesBack() {
			fs.disownNode(n)
		}
	}
}

// disownNode drops n's guest-side state, unless a local handle still
// uses it.
func (fs *FS) disownNode(n *node) {
	w := fs.wb
	w.mu.Lock()
	defer w.mu.Unlock()
	l := n.local
	if l == nil || l.opens > 0 || l.pending > 0 {
		return
	}
	for _, c := range l.children {
		fs.unpin(c)
	}
	l.dropListing(fs.unpin)
	if l.staging != "" {
		w.dropStagingLocked(n)
	}
	n.local = nil
}

// fresh reports whether n was made in the guest and the host may not
// have it yet: it has no host id.
func (fs *FS) fresh(n *node) bool {
	fs.nodes.mu.Lock()
	defer fs.nodes.mu.Unlock()
	return n.up == 0 && n.id != rootID
}

// hostFirst writes everything back before an operation on a node made
// in the guest goes to the host, which must have the node by then.
func (fs *FS) hostFirst(nodeid uint64) {
	if n := fs.nodes.get(nodeid); n != nil && fs.wb != nil && fs.fresh(n) {
		fs.writeBackFirst()
	}
}

// hostHandleFirst is hostFirst for a local handle, for operations (such
// as locks) that the host serves on its own open file of it.
func (fs *FS) hostHandleFirst(fh uint64) {
	if h := fs.localHandle(fh); h != nil {
		fs.writeBackFirst()
	}
}

// dropListing lets go of the directory's shared listing, which handles
// may still be reading. Needs w.mu.
func (l *local) dropListing(unpin func(*node)) {
	if l.listing != nil {
		l.listing.release(unpin)
		l.listing = nil
	}
}

package overlay

import (
	"github.com/cachefs/cachefs/upstream"
)

// The steps of a plan (plan.go), in order.

// moveOut is step 1. A move goes straight to its target if it can, or
// is parked at a temporary name and finished by a later pass, after
// this one's state is logged. No object goes, in the pass that makes
// them, to a path a move leaves (its source) or a removal takes: so a
// pass sent again after a crash, planned again from the state as it
// was, finds each object it moves still at its source or already at
// its target, and a removal never takes what a move brought.
func (p *planner) moveOut() {
	var moves []*action
	for _, a := range p.acts {
		if a.from != "" {
			moves = append(moves, a)
			p.vacated = append(p.vacated, a.from)
		}
	}
	for i, a := range moves {
		if a.e.kind == kDir {
			// The scan compared the directory's entries with no records
			// (they were at its old path): what went from it since is
			// found by a scan of it once its records are moved.
			p.rescan = append(p.rescan, a.e.path)
		}
		cur, dst := p.sim.now(a.from), a.e.path
		switch {
		case cur == dst: // moved with its parent
		case p.direct(dst, moves[i+1:]):
			p.addMove(a, cur, dst)
			p.ready[dst] = true
		default:
			a.temp = tempName(a.e.ino)
			p.addMove(a, cur, a.temp)
			p.defer_(dst)
		}
		p.commitMove(a)
	}
}

// direct reports whether a move to dst can be made now.
func (p *planner) direct(dst string, later []*action) bool {
	if p.vacatedUnder(dst) || p.removedUnder(dst) {
		return false
	}
	for _, m := range later {
		if under(p.sim.now(m.from), dst) {
			return false // would land on a source still to move
		}
	}
	return p.parentReady(dst, later)
}

// vacatedUnder reports whether path is a source of this pass's moves,
// or lies under one.
func (p *planner) vacatedUnder(path string) bool {
	for _, v := range p.vacated {
		if under(path, v) {
			return true
		}
	}
	return false
}

// removedUnder reports whether path is removed by this pass, or lies
// under a path that is.
func (p *planner) removedUnder(path string) bool {
	for _, r := range p.removals {
		if under(path, r) {
			return true
		}
	}
	return false
}

// defer_ leaves what goes at path (and under it) to a later pass.
func (p *planner) defer_(path string) {
	p.deferred = append(p.deferred, path)
}

// deferredUnder reports whether path waits for a later pass.
func (p *planner) deferredUnder(path string) bool {
	if path != "" && p.vacatedUnder(path) {
		return true
	}
	for _, d := range p.deferred {
		if under(path, d) {
			return true
		}
	}
	return false
}

// parentReady reports whether dst's parent directory is on the host at
// its path and stays there.
func (p *planner) parentReady(dst string, later []*action) bool {
	par := parentPath(dst)
	if par == "" || p.ready[par] {
		return true
	}
	n := p.st.find(par)
	if n == nil || n.rec.Kind != kDir || n.rec.Ino == 0 || p.sim.now(par) != par {
		return false
	}
	if e := p.sc.changed[par]; e != nil && !n.rec.sameInode(e) {
		return false
	}
	for _, m := range later {
		if under(par, p.sim.now(m.from)) {
			return false
		}
	}
	return true
}

func (p *planner) addMove(a *action, from, to string) {
	p.sim.add(from, to)
	p.touch(from)
	p.touch(to)
	dst := a.e.path
	p.groups = append(p.groups, &group{path: dst,
		steps: []step{{op: upstream.WBOp{Kind: upstream.WBMoveOver, Path: p.host(from), Path2: p.host(to)}}},
		fail:  func() { p.poison(dst) }})
}

// commitMove moves the state along: to the target, or to the temporary
// name of a parked move, where a record of a lower object not recorded
// before is made (with the lower path it came from).
func (p *planner) commitMove(a *action) {
	n, dst, e, origin := a.node, a.e.path, a.e, a.origin
	if a.temp != "" {
		dst = a.temp
	}
	p.commits = append(p.commits, func() {
		switch {
		case n != nil:
			p.st.move(n, dst)
		case a.temp != "":
			p.st.set(dst, record{Kind: e.kind, Ino: e.ino, Btime: e.btime, Origin: origin})
		}
	})
}

// poison makes the state at path unknown.
func (p *planner) poison(path string) {
	if n := p.st.find(path); n != nil {
		p.st.poison(n)
	} else {
		p.st.set(path, record{})
	}
}

// remove is step 2.
func (p *planner) remove() {
	last := "\x00"
	for _, r := range p.removals {
		if !under(r, last) {
			last = r
			p.touch(r)
			p.groups = append(p.groups, &group{path: r,
				steps: []step{{op: upstream.WBOp{Kind: upstream.WBRemoveTree, Path: p.host(r)}}},
				fail:  func() { p.st.set(r, record{}) }})
		}
		e := p.sc.changed[r]
		p.commits = append(p.commits, func() {
			if n := p.st.find(r); n != nil {
				p.st.remove(n)
			}
			if e != nil && e.kind == kWhiteout {
				p.st.set(r, record{Kind: kWhiteout, Ino: e.ino, Ctime: e.ctime})
			}
		})
	}
}

// tree is step 3.
func (p *planner) tree() {
	var links []*action
	for _, a := range p.acts {
		if a.link != "" {
			links = append(links, a)
			continue
		}
		p.entry(a)
	}
	for _, a := range links {
		p.linkOps(a)
	}
	p.touchedAttrs()
	for i := len(p.dirAttrs) - 1; i >= 0; i-- {
		p.groups = append(p.groups, p.dirAttrs[i])
	}
}

// entry adds the ops of one changed entry.
func (p *planner) entry(a *action) {
	e, path := a.e, a.e.path
	if e.path == "" && p.prefix == "" {
		return // the export root: its attributes are the host's
	}
	if p.deferredUnder(path) {
		p.again = true
		return
	}
	g := &group{path: path, fail: func() { p.poison(path) }}
	if !p.sc.unchanged(&a.rec, e) {
		if path != "" { // the root is there
			p.create(g, a)
		}
		if p.needsXattrs(a) {
			g.add(upstream.WBOp{Kind: upstream.WBXattrs, Path: p.host(path), Data: upstream.EncodeXattrs(e.xattrs)})
		}
		p.attrs(g, e)
	}
	if len(g.steps) > 0 {
		p.groups = append(p.groups, g)
		p.groupOf[path] = g
	}
	r := record{Kind: e.kind, Ino: e.ino, Btime: e.btime, Ctime: e.ctime, Size: e.size, Mtime: e.mtime,
		Data: e.kind == kFile && !e.metacopy, Xattrs: len(e.xattrs) > 0, Origin: a.origin}
	p.commitRecord(path, a.node, r)
}

// commitRecord records r at path; what the path held before goes if it
// was another object, with what was under it.
func (p *planner) commitRecord(path string, moved *hnode, r record) {
	p.commits = append(p.commits, func() {
		n := p.st.find(path)
		other := n != nil && n.rec.Kind != kUnknown && (n.rec.Ino != r.Ino || n.rec.Btime != r.Btime || n.rec.Kind != r.Kind)
		if n != nil && n != moved && n.parent != nil && (r.Kind != kDir || other) {
			p.st.remove(n)
		}
		p.st.set(path, r)
	})
}

// create adds the ops that make e at its path, if the host lacks it.
func (p *planner) create(g *group, a *action) {
	e, hp := a.e, p.host(a.e.path)
	isNew := a.from == "" && !a.same()
	op := upstream.WBOp{Path: hp, Mode: e.mode & 07777, Uid: e.uid, Gid: e.gid, Flags: upstream.WBReplace}
	switch {
	case e.kind == kDir && isNew:
		op.Kind = upstream.WBMkdir
	case e.kind == kSymlink && isNew:
		op.Kind, op.Target = upstream.WBSymlink, e.target
	case (e.kind == kSpecial || e.kind == kDevice) && isNew:
		op.Kind, op.Mode, op.Size = upstream.WBMknod, e.mode, uint64(e.rdev)
	case e.kind == kFile && p.needsData(a):
		op.Kind = upstream.WBCreate
		if e.origin || !isNew {
			op.Flags = 0 // the host's file is this one: written in place
		}
		g.add(op)
		g.steps = append(g.steps, step{op: upstream.WBOp{Kind: upstream.WBWrite, Path: hp}, file: a.e.path})
		p.touch(a.e.path)
		return
	default:
		return
	}
	g.add(op)
	p.touch(a.e.path)
}

// needsData reports whether a file's data must be sent: the upper file
// holds it (not metacopy) and the host's is not known to be the same.
func (p *planner) needsData(a *action) bool {
	e, r := a.e, &a.rec
	if e.metacopy {
		return false
	}
	if !a.same() || !r.Data {
		return true
	}
	if r.Size != e.size || r.Mtime != e.mtime || p.modified[e.path] {
		return true
	}
	return p.blind && r.Ctime != e.ctime
}

// needsXattrs reports whether e's xattrs must be set: it has some, had
// some, or was copied up from a lower file whose xattrs the guest may
// have removed.
func (p *planner) needsXattrs(a *action) bool {
	e := a.e
	if e.kind == kSymlink {
		return false
	}
	return len(e.xattrs) > 0 || a.rec.Xattrs || (e.origin && !a.same())
}

// same reports whether the record the action starts from is of the
// entry's own inode (an inode number reused for another kind is not).
func (a *action) same() bool { return a.rec.sameInode(a.e) && a.rec.Kind == a.e.kind }

// attrs adds e's owner, mode and times: to g, or for a directory to a
// group of its own sent after everything in it.
func (p *planner) attrs(g *group, e *entry) {
	hp, path := p.host(e.path), e.path
	owner := upstream.WBOp{Kind: upstream.WBSetattr, Path: hp, Valid: upstream.SetUid | upstream.SetGid, Uid: e.uid, Gid: e.gid}
	rest := upstream.WBOp{Kind: upstream.WBSetattr, Path: hp, Valid: upstream.SetAtime | upstream.SetMtime,
		Mode: e.mode & 07777, Atime: e.atime, Mtime: e.mtime}
	if e.kind != kSymlink {
		rest.Valid |= upstream.SetMode
	}
	if e.kind == kDir {
		g = &group{path: path, fail: func() { p.poison(path) }}
		p.dirAttrs = append(p.dirAttrs, g)
		p.timed[path] = true
	}
	if e.mode&06000 == 0 {
		rest.Valid |= owner.Valid // a chown clears no set-id bit here
		rest.Uid, rest.Gid = e.uid, e.gid
		g.add(rest)
		return
	}
	g.add(owner)
	g.add(rest)
}

// linkOps adds a new name of a file the host has under another.
func (p *planner) linkOps(a *action) {
	e, path := a.e, a.e.path
	if p.deferredUnder(path) || p.deferredUnder(a.link) {
		p.again = true
		return
	}
	// The link's record says the host has the file's data: only if
	// the file's own group (its data) got through.
	g := &group{path: path, fail: func() { p.poison(path) }, after: p.groupOf[a.link]}
	g.add(upstream.WBOp{Kind: upstream.WBRemoveTree, Path: p.host(path)})
	g.add(upstream.WBOp{Kind: upstream.WBLink, Path: p.host(a.link), Path2: p.host(path)})
	p.touch(path)
	p.groups = append(p.groups, g)
	r := record{Kind: e.kind, Ino: e.ino, Btime: e.btime, Ctime: e.ctime, Size: e.size, Mtime: e.mtime, Data: e.kind == kFile && !e.metacopy, Origin: a.origin}
	p.commitRecord(path, nil, r)
}

func (g *group) add(op upstream.WBOp) { g.steps = append(g.steps, step{op: op}) }

// touch notes that an op at path changes its parent directory on the
// host (its mtime, ctime).
func (p *planner) touch(path string) {
	if path != "" {
		p.touched[parentPath(path)] = true
	}
}

// touchedAttrs gives the directories this pass's ops changed on the
// host whose own attributes it does not send (their upper directory did
// not change, as for a parked move's parent) their times again.
func (p *planner) touchedAttrs() {
	for d := range p.touched {
		if p.timed[d] || p.deferredUnder(d) || (d == "" && p.prefix == "") {
			continue
		}
		if e, err := upperEntry(p.sc.upper, d); err == nil && e.kind == kDir {
			p.attrs(nil, e)
		}
	}
}

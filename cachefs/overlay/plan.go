package overlay

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// Planning a pass: the changed and gone entries of a scan become ops in
// an order the host can apply one after the other:
//
//  1. moves: objects the host has (a lower file or directory that
//     overlayfs renamed, found by its redirect; or something written
//     back before and renamed in the upper directory since, found by
//     its inode) go to their new paths, parents first; a move that
//     cannot go straight there yet (its target's parent is not there
//     yet, it would land on a source still to move or on a path about
//     to be removed, or moves form a cycle) is parked at a temporary
//     name at the subtree's root and finished in 3;
//  2. removals: whiteouts, records gone from the upper directory, and
//     opaque directories (which replace the lower's) go, with their
//     subtrees;
//  3. the tree, parents first: directories, files (created and written
//     in data extents), symlinks, special files, attributes and xattrs;
//     then new hard links; then the attributes of directories, whose
//     times the ops above changed.
//
// The host state is changed as if every op succeeds; a group of ops
// that fails poisons the records it was to make.

// step is one op of a pass; a write step's data is read from file
// when the op is sent.
type step struct {
	op   upstream.WBOp
	file string // WBWrite: the upper file to read, relative to the upper root
}

// group is the ops about one path; they succeed or fail together.
type group struct {
	path  string // upper path, for failures
	steps []step
	fail  func() // poisons the state the group was to make
	after *group // an earlier group this one fails with: a link's file
}

// action is what a changed entry needs besides its own ops.
type action struct {
	e      *entry
	from   string // a move's source: its host path before the pass ("" none)
	node   *hnode // the state moved along with it, if any
	origin string // the lower path it came from, if moved by redirect
	link   string // an existing name of the same file to link ("" none)
	temp   string // parked here in step 1, for a later pass to finish
	rec    record // the record the move or its path had before the pass
}

type planner struct {
	sc       *scan
	st       *hostState
	prefix   string          // the subtree's path in the export
	modified map[string]bool // files written to (watcher)
	blind    bool            // no write hints: a changed ctime means changed data
	refused  []Failure       // never written back: park names
	keepGone bool            // the scan did not settle: gone records may have moved unseen

	acts     []*action
	removals []string
	vacated  []string // host paths this pass's moves leave
	deferred []string // targets of parked moves: finished by a later pass
	again    bool     // something waits for a later pass
	rescan   []string // directories moved by this pass: the next scans them whole
	sim      hostSim
	ready    map[string]bool   // targets already moved in step 1
	planned  map[uint64]*entry // the first new name of each inode, but directories
	claimed  map[*hnode]string // records moved in this pass, to where
	groups   []*group
	commits  []func()
	dirAttrs []*group
	timed    map[string]bool   // directories whose attributes are sent
	groupOf  map[string]*group // the entry group of each path
	touched  map[string]bool   // directories the ops change on the host
}

func newPlanner(sc *scan, prefix string, modified map[string]bool, blind bool) *planner {
	return &planner{sc: sc, st: sc.state, prefix: prefix, modified: modified, blind: blind,
		ready: map[string]bool{}, planned: map[uint64]*entry{}, claimed: map[*hnode]string{}, timed: map[string]bool{}, touched: map[string]bool{},
		groupOf: map[string]*group{}}
}

// plan returns the pass's groups and applies the state changes.
func (p *planner) plan() []*group {
	p.actions()
	p.collectRemovals()
	p.moveOut()
	p.remove()
	p.tree()
	for _, c := range p.commits {
		c()
	}
	return p.groups
}

// actions decides, top-down, what each changed entry is.
func (p *planner) actions() {
	paths := make([]string, 0, len(p.sc.changed))
	for path := range p.sc.changed {
		paths = append(paths, path)
	}
	slices.SortFunc(paths, byDepth)
	for _, path := range paths {
		e := p.sc.changed[path]
		switch {
		case e.kind == kWhiteout:
			p.removals = append(p.removals, path)
		case parkedPath(path):
			p.refused = append(p.refused, Failure{Path: path, Op: "name", Errno: syscall.EPERM})
		default:
			p.acts = append(p.acts, p.action(e))
		}
	}
}

// parkedPath reports whether a name in path is a park name, which the
// write-back keeps for itself (tempName): the guest's own file of that
// name would be taken for a parked object, or hidden on the host.
func parkedPath(path string) bool {
	for _, name := range strings.Split(path, "/") {
		if upstream.Parked(name) {
			return true
		}
	}
	return false
}

// byDepth orders paths parents first.
func byDepth(a, b string) int {
	if c := cmp.Compare(depthOf(a), depthOf(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func depthOf(p string) int {
	if p == "" {
		return -1
	}
	return strings.Count(p, "/")
}

// action finds where a changed entry comes from.
func (p *planner) action(e *entry) *action {
	a := &action{e: e}
	n := p.st.find(e.path)
	if n != nil {
		a.rec = n.rec
	}
	if n != nil && n.rec.sameInode(e) && n.rec.Kind == e.kind {
		return a // changed where it is
	}
	if p.byInode(a) {
		return a
	}
	if first := p.planned[e.ino]; first != nil && p.sameFile(first, e) {
		a.link = first.path // another new name of a file new in this pass
		return a
	}
	if e.redirect != "" && e.path != "" {
		p.byRedirect(a, n)
	}
	if e.kind != kDir && p.planned[e.ino] == nil {
		p.planned[e.ino] = e
	}
	return a
}

// sameFile reports whether e, new in this pass, is another name of
// first, the first new name of its inode in the pass. first may have
// been scanned with one link and e linked to it after: then first is
// looked at again, for the inode could have been freed and taken by e
// in between.
func (p *planner) sameFile(first, e *entry) bool {
	if e.kind == kDir || first.kind != e.kind {
		return false
	}
	if first.btime != 0 && e.btime != 0 && first.btime != e.btime {
		return false
	}
	if first.nlink > 1 {
		return true
	}
	return e.nlink > 1 && p.upperHas(first.path, e)
}

// upperHas reports whether the upper directory holds e's inode (number
// and birth time) at path now.
func (p *planner) upperHas(path string, e *entry) bool {
	now, err := upperEntry(p.sc.upper, path)
	return err == nil && now.ino == e.ino && now.btime == e.btime
}

// byInode finds a changed entry's inode among the records: the same
// file or directory written back before under another name, which
// moved (its old name is gone) or got a new hard link.
func (p *planner) byInode(a *action) bool {
	e := a.e
	if !indexed(e.kind) {
		return false
	}
	for _, c := range slices.Clone(p.st.byIno[e.ino]) {
		cp := c.path()
		if c.rec.Kind != e.kind || !c.rec.sameInode(e) || cp == e.path || c.parent == nil {
			continue
		}
		if dst, ok := p.claimed[c]; ok && e.kind != kDir {
			a.link = dst // moved to another name of the file in this pass
			return true
		}
		if e.kind != kDir && p.stillThere(cp, e) {
			a.link = cp
			return true
		}
		p.claimed[c] = e.path
		a.from, a.node, a.rec, a.origin = cp, c, c.rec, c.rec.Origin
		if e.redirect != "" {
			a.origin = p.lowerPath(e.path, e.redirect) // renamed since written back
		}
		return true
	}
	return false
}

// stillThere reports whether the upper directory has e's inode at path.
func (p *planner) stillThere(path string, e *entry) bool {
	if c := p.sc.changed[path]; c != nil {
		return c.ino == e.ino && c.btime == e.btime
	}
	return !p.sc.gone[path] && p.upperHas(path, e)
}

// byRedirect finds the lower object overlayfs moved to a changed entry.
func (p *planner) byRedirect(a *action, n *hnode) {
	lp := p.lowerPath(a.e.path, a.e.redirect)
	a.origin = lp
	if n != nil && n.rec.Origin == lp && a.same() {
		return
	}
	src := p.st.hostOf(lp)
	if src == a.e.path {
		return
	}
	a.from = src
	if a.node = p.st.find(src); a.node != nil && a.node.parent != nil {
		a.rec = a.node.rec
	} else {
		a.node, a.rec = nil, record{}
	}
}

// lowerPath returns the lower path an upper entry with this redirect
// stands for: an absolute redirect is a path from the lower root; a
// relative one is a name in the lower directory of the entry's parent.
func (p *planner) lowerPath(path, redirect string) string {
	if strings.HasPrefix(redirect, "/") {
		return strings.Trim(redirect, "/")
	}
	dir, _ := splitPath(path)
	return child(p.lowerDir(dir), redirect)
}

// lowerDir returns the lower path of upper directory dir.
func (p *planner) lowerDir(dir string) string {
	if dir == "" {
		return ""
	}
	if r := p.redirectOf(dir); r != "" {
		return p.lowerPath(dir, r)
	}
	parent, name := splitPath(dir)
	return child(p.lowerDir(parent), name)
}

func (p *planner) redirectOf(dir string) string {
	if e := p.sc.changed[dir]; e != nil {
		return e.redirect
	}
	dfd, name, err := openParent(p.sc.upper, dir)
	if err != nil {
		return ""
	}
	defer unix.Close(dfd)
	v, _ := getXattr(fdPath(dfd, name), xattrRedirect)
	return string(v)
}

// collectRemovals adds the records gone from the upper directory, but
// those that moved, and the opaque directories that are new.
func (p *planner) collectRemovals() {
	moved := map[string]bool{}
	for _, a := range p.acts {
		if a.node != nil {
			moved[a.from] = true
		}
	}
	for path := range p.sc.gone {
		if !moved[path] && !p.keepGone {
			p.removals = append(p.removals, path)
		}
	}
	for _, a := range p.acts {
		if a.e.kind == kDir && a.e.opaque && a.from == "" && !a.same() {
			p.removals = append(p.removals, a.e.path)
		}
	}
	slices.SortFunc(p.removals, byDepth)
	p.removals = slices.Compact(p.removals)
}

// host returns the export path of a subtree path.
func (p *planner) host(rel string) string {
	if rel == "" {
		return p.prefix
	}
	return child(p.prefix, rel)
}

// tempName is where step 1 parks the object of upper inode ino: a name
// at the subtree's root, the same for the same object in a pass made
// again after a crash. The host server hides park names from the guest
// (upstream.Parked): the overlay's lower view never shows one.
func tempName(ino uint64) string {
	return upstream.ParkPrefix + strconv.FormatUint(ino, 10)
}

// hostSim follows the host paths that step 1's moves change.
type hostSim struct {
	moves [][2]string
}

func (h *hostSim) add(from, to string) { h.moves = append(h.moves, [2]string{from, to}) }

// now returns where what was at p before the pass is now.
func (h *hostSim) now(p string) string {
	for _, m := range h.moves {
		if under(p, m[0]) {
			p = m[1] + p[len(m[0]):]
		}
	}
	return p
}

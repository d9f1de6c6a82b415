package overlay

import (
	"syscall"
)

// maxSettle bounds the rescans of a pass for changes made while it
// scanned.
const maxSettle = 8

// pass scans, plans and sends once.
func (e *Engine) pass(full, blind bool) sendOut {
	var ch changes
	if e.w != nil {
		e.w.wake()
		e.w.reprobe()
		ch = e.w.take()
	}
	full = full || ch.full
	modified := ch.modified
	if modified == nil {
		modified = map[string]bool{}
	}
	sc := newScan(e.o.Upper, e.st, e.w, modified)
	sc.root()
	if full {
		sc.dir("", true)
	}
	for _, d := range ch.dirs {
		sc.dir(d, false)
	}
	for _, d := range e.rescan {
		sc.dir(d, true)
	}
	e.rescan = nil
	settled := e.settle(sc, modified)
	p := newPlanner(sc, e.o.Prefix, modified, blind)
	p.keepGone = !settled
	groups := p.plan()
	out := sendGroups(e.ctx, e.o.Upper, e.o.Send, groups)
	out.again, out.rescan = p.again, p.rescan
	e.noteReads(out.reads)
	e.afterPass(p, out, full)
	return out
}

// settle rescans the directories changed while the pass scanned, until
// nothing moved: a move's events come together, so after it every
// object moved out of a scanned directory was seen where it went. The
// other changes (creates, writes, removals) cannot make the scan take a
// moved object for gone: once none but those come, they are left for
// the next pass, not rescanned now (an untar's would be, a pass's whole
// new subtrees again at each round). It reports false if moves kept
// coming.
func (e *Engine) settle(sc *scan, modified map[string]bool) bool {
	if e.w == nil {
		return true
	}
	// The events read here may have quieted directories that are not
	// rescanned now: their IN_MODIFY comes back before this pass reads
	// any file's data (quiet.go), and the next pass rescans them.
	defer e.w.wake()
	for i := 0; i < maxSettle; i++ {
		moved := e.w.moved
		if !e.w.read() {
			return true
		}
		if e.w.moved == moved && !e.w.full {
			return true // marked dirty: the next pass's
		}
		ch := e.w.take()
		if ch.full {
			e.w.full = true // rescanned by the next pass
			return false
		}
		for p := range ch.modified {
			modified[p] = true
		}
		for _, d := range ch.dirs {
			sc.rescan(d)
		}
	}
	return false
}

// afterPass saves the state and notes the pass's failures.
func (e *Engine) afterPass(p *planner, out sendOut, full bool) {
	records, err := e.sf.save(e.st)
	if err != nil {
		e.o.Logf("overlay: saving %s: %v", e.o.State, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if full && out.err == nil {
		clear(e.failures)
	}
	for _, path := range out.ok {
		delete(e.failures, path)
	}
	for _, f := range out.failed {
		e.failures[f.Path] = f
	}
	for _, f := range p.refused {
		e.failures[f.Path] = f
	}
	for path, err := range p.sc.errs {
		errno, ok := err.(syscall.Errno)
		if !ok {
			errno = syscall.EIO
		}
		e.failures[path] = Failure{Path: path, Op: "scan", Errno: errno}
		e.o.Logf("overlay: reading %s in %s: %v", path, e.o.Upper, err)
	}
	s := &e.stats
	s.Passes++
	if e.w != nil {
		s.Quieted = e.w.quieted
	}
	if full {
		s.FullPasses++
	}
	s.Ops += uint64(out.ops)
	s.Bytes += uint64(out.bytes)
	if records >= 0 {
		s.StateRecords = records
	}
}

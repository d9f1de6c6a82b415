package cachefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// Write-back of delegated subtrees. Changes made in the guest are
// applied to its own state at once (delegated.go) and appended here as
// records naming paths relative to the export root, in the order they
// happened, so that replaying them keeps the host tree valid at every
// step. A flusher sends them in batches (OpApply), many per round trip;
// the host applies each batch in order. File contents live in staging
// files in the state directory and are read when their record is sent.
//
// The journal file holds the records not yet on the host, and markers
// of what the host has; it survives a crash of the daemon and is
// replayed from the last marker when it starts again (journal.go keeps
// it whole when the state directory fills up). The flusher lets a small
// batch grow for wbGather unless somebody waits. A record that the
// host refuses for good is reported (Failures, and by every flush while it
// stands: refused) and dropped; a lost
// connection is retried until the host answers. A record the host has no
// space for (ENOSPC, EDQUOT), or no descriptors or memory
// (upstream.WBStalls), stalls the queue instead: it is reported and
// kept, with the guest's data, and sent again after a growing pause or
// at once when a flush or fsync waits; the records after it wait too.

// record is one journaled change.
type record struct {
	Done    uint64 `json:",omitempty"` // a marker: the host has every record up to Done
	Seq     uint64
	Op      upstream.WBOp // Data is never journaled: Staging holds it
	Staging string        `json:",omitempty"` // WBWrite: the file with the contents
	node    *node         // the node whose pending count it holds, if any
	// dirs are the directories whose entries it changes: that of Path,
	// and of Path2 for a rename.
	dirs [2]*node
}

// Failure is a change the host refused.
type Failure struct {
	Path  string
	Op    string
	Errno string
}

// WritebackStats count the write-back.
type WritebackStats struct {
	Pending, Sent, Batches, Retries, Conflicts uint64
	Passthrough                                uint64 // opens of staging files passed through
	LocalWrites                                uint64 // writes to staging files through the daemon
	ReadyCreates                               uint64 // creates that took a ready staging file
	Ready                                      int    // ready staging files now
	Failures                                   []Failure
	Stalled                                    *Failure `json:",omitempty"` // waits for space on the host
}

// WritebackLimits bound what waits for write-back; writers wait when a
// bound is reached. Zero fields take defaults.
type WritebackLimits struct {
	Records int   // 0: 200,000
	Bytes   int64 // staged file bytes; 0: 2 GiB
}

type writeback struct {
	fs  *FS             // immutable
	dir string          // immutable: the state directory
	fds *stagingFDs     // immutable: descriptors of staging files
	lim WritebackLimits // immutable

	// owning: some directory was owned (had local children) since the
	// start; until then no lookup needs mu. Never cleared.
	owning atomic.Bool

	mu       sync.Mutex // protects the following and every node.local
	cond     *sync.Cond
	journal  *os.File
	queue    []*record
	seq      uint64         // last record appended
	done     uint64         // records up to done are on the host (or failed)
	staged   int64          // bytes in staging files
	gathered bool           // the flusher let the queue grow once already
	waiters  int            // callers of wait blocked now: a batch is sent without gathering
	dropped  []string       // staging files the host has, to recycle (staging.go)
	nextFile uint64         // staging files are named data/N, N <= nextFile
	spare    []string       // emptied staging files kept for reuse (staging.go)
	ready    []readyFile    // empty staging files open for creates (staging_ready.go)
	readying int            // ready files being made now
	replayed map[string]int // records replayed from the journal per staging file
	stats    WritebackStats
	closed   bool
	held     bool               // tests: nothing is sent while held
	crashAt  func()             // tests: called where a crash leaves a journal replacement as it is
	reported int                // failures returned by wait so far
	refused  map[string]Failure // standing refusals by the path they leave wrong (refusedKey)
	unkept   int                // refusals past maxRefused: they stand for good
	stalled  *Failure           // the host has no space for the queue's head
	stalls   uint64             // sends that ended stalled
	retry    bool               // a stalled queue may be sent again
	j        journalState
	pt       bool             // staging files may be passed through (passthrough.go)
	plain    map[*node]int    // open handles per node that are not passthrough
	open     map[*handle]bool // open local handles: wait queues what they wrote

	readyKick chan struct{} // asks keepReady for ready files; closed by close
}

const wbBatch = 512          // records per OpApply at most
const wbBatchBytes = 2 << 20 // data per OpApply at most
const wbChunk = 1 << 20      // data per WBWrite

// wbGather is how long the flusher lets a small batch grow while nobody
// waits for it: changes come in bursts of a few records per file, and a
// batch per burst would cost a round trip, a host apply and a journal
// marker each.
//
// A change the host refused stands (refused) until a later change at
// its path is on the host: every flush (FS.WriteBack) reports the
// standing ones, whoever saw them first (a wait for an fsync or a link
// returns only the failures new to it).
const wbGather = 2 * time.Millisecond

func newWriteback(fs *FS, dir string, lim WritebackLimits) (*writeback, error) {
	if lim.Records == 0 {
		lim.Records = 200000
	}
	if lim.Bytes == 0 {
		lim.Bytes = 2 << 30
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0700); err != nil {
		return nil, err
	}
	w := &writeback{fs: fs, dir: dir, fds: newStagingFDs(dir, stagingFDMax), lim: lim, plain: map[*node]int{},
		open: map[*handle]bool{}, readyKick: make(chan struct{}, 1), refused: map[string]Failure{}}
	w.cond = sync.NewCond(&w.mu)
	old, done, err := w.openJournal(filepath.Join(dir, "journal"))
	if err != nil {
		return nil, err
	}
	w.queue, w.seq = old, done
	for _, r := range old {
		w.seq = max(w.seq, r.Seq)
	}
	w.done = w.seq - uint64(len(old))
	w.j.marked = w.done
	if err := w.loadStaging(old); err != nil {
		w.closeJournalLocked()
		return nil, err
	}
	go w.run()
	go w.keepReady()
	return w, nil
}

// add journals a change and queues it; n's pending count holds its local
// state until the change is on the host. It waits while the limits are
// reached and the flusher can bring them down (limitedLocked). Needs w.mu.
func (w *writeback) addLocked(op upstream.WBOp, staging string, n *node, dirs ...*node) {
	for w.limitedLocked() {
		w.cond.Wait()
	}
	w.seq++
	r := &record{Seq: w.seq, Op: op, Staging: staging, node: n}
	copy(r.dirs[:], dirs)
	if n != nil && n.local != nil {
		n.local.pending++
	}
	w.appendLocked(r)
	w.queue = append(w.queue, r)
	w.stats.Pending = uint64(len(w.queue))
	w.cond.Broadcast()
}

// limitedLocked reports whether a change must wait for the flusher: a
// limit is reached and there are records to send, whose write-back
// brings it down. A limit slows writers, never stops them: with nothing
// queued (the staged bytes of files still open, which only their own
// records would free) or a queue stalled for space on the host, a
// writer goes on (the state directory's space bounds it then:
// roomLocked). Needs w.mu.
func (w *writeback) limitedLocked() bool {
	over := len(w.queue) >= w.lim.Records || w.staged >= w.lim.Bytes
	return over && len(w.queue) > 0 && w.stalled == nil && !w.closed
}

// wait blocks until every change made before it is on the host (what
// open local handles wrote included), or a send stalled for lack of
// space on the host (which it retries at once if stalled already), and
// returns the failures no earlier wait returned, and the stall.
func (w *writeback) wait() []Failure {
	w.mu.Lock()
	defer w.mu.Unlock()
	for h := range w.open { // written, and not closed yet
		w.fs.queueWrittenLocked(h)
	}
	target, stalls := w.seq, w.stalls
	w.waiters++
	defer func() { w.waiters-- }()
	if w.stalled != nil {
		w.retry = true
		w.cond.Broadcast()
	}
	for w.done < target && !w.closed && (w.stalled == nil || w.stalls == stalls) {
		w.cond.Wait()
	}
	out := append([]Failure(nil), w.stats.Failures[w.reported:]...)
	w.reported = len(w.stats.Failures)
	if w.stalled != nil && w.done < target && !slices.Contains(out, *w.stalled) {
		out = append(out, *w.stalled)
	}
	return out
}

func (w *writeback) run() {
	backoff, pause := 10*time.Millisecond, time.Second
	for {
		w.recycleDropped()
		w.mu.Lock()
		for !w.sendableLocked() && !w.recyclableLocked() && !w.closed {
			w.cond.Wait()
		}
		if w.closed {
			w.mu.Unlock()
			return
		}
		if !w.sendableLocked() {
			w.mu.Unlock()
			continue // only staging files to recycle
		}
		if w.gatherLocked() {
			continue
		}
		batch := w.takeLocked()
		w.retry = false
		w.mu.Unlock()
		ops, srcs, sizes := w.ops(batch)
		resp, err := w.send(ops, srcs)
		if err != nil && transient(err) {
			w.mu.Lock()
			w.stats.Retries++
			w.mu.Unlock()
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		if !w.finish(batch, ops, sizes, resp, err) {
			pause = time.Second
			continue
		}
		time.AfterFunc(pause, w.retryStalled)
		pause = min(2*pause, 30*time.Second)
	}
}

// sendableLocked reports whether the flusher has a batch to send. Needs
// w.mu.
func (w *writeback) sendableLocked() bool {
	return len(w.queue) > 0 && !w.held && (w.stalled == nil || w.retry)
}

// gatherLocked lets a small batch grow for wbGather, once, unless a
// caller of wait is blocked or a stalled queue is retried; it reports
// whether it did (and unlocked w.mu). Needs w.mu.
func (w *writeback) gatherLocked() bool {
	if len(w.queue) >= wbBatch/2 || w.waiters > 0 || w.retry || w.gathered {
		w.gathered = false
		return false
	}
	w.gathered = true
	w.mu.Unlock()
	time.Sleep(wbGather)
	return true
}

// retryStalled lets a stalled queue be sent again.
func (w *writeback) retryStalled() {
	w.mu.Lock()
	w.retry = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// send applies ops on the host in order, in as many requests as the
// frame size needs, reading each op's data from its source (srcs[i])
// just before its request: a batch holds one request's data at most.
func (w *writeback) send(ops []upstream.WBOp, srcs []dataSrc) (*upstream.ApplyResp, error) {
	all := &upstream.ApplyResp{}
	for len(ops) > 0 {
		n, bytes := 0, int64(0)
		for n < len(ops) && (n == 0 || bytes+srcs[n].n <= wbBatchBytes) {
			bytes += srcs[n].n + int64(len(ops[n].Path)+len(ops[n].Path2)+64)
			n++
		}
		var err error
		for i := 0; i < n && err == nil; i++ {
			ops[i].Data, err = srcs[i].read()
		}
		if err != nil {
			w.fs.opts.Logf("cachefs: write-back: %v (sent again)", err)
		} else {
			var resp upstream.ApplyResp
			err = w.fs.rpc(upstream.OpApply, &upstream.ApplyReq{Ops: ops[:n]}, &resp)
			all.Errnos = append(all.Errnos, resp.Errnos...)
			all.Inos = append(all.Inos, resp.Inos...)
		}
		for i := range n {
			ops[i].Data = nil
		}
		if err != nil {
			return nil, err
		}
		ops, srcs = ops[n:], srcs[n:]
	}
	return all, nil
}

// dataSrc is where a WBWrite op's data is: n bytes at off of a staging
// file (none if n is 0).
type dataSrc struct {
	path   string
	off, n int64
}

// read returns the source's data: shorter where the file is, nothing
// where it is gone (written back and dropped already). Any other error
// is errStagingRead: the batch is sent again, never with data missing.
func (s dataSrc) read() ([]byte, error) {
	if s.n == 0 {
		return nil, nil
	}
	f, err := openPlain(s.path, os.O_RDONLY, 0)
	if errors.Is(err, syscall.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errStagingRead, err)
	}
	defer f.Close()
	b := make([]byte, s.n)
	k, err := f.ReadAt(b, s.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %v", errStagingRead, err)
	}
	return b[:k], nil
}

// errStagingRead is a staging file that could not be read for sending
// (the daemon out of descriptors, say): transient.
var errStagingRead = errors.New("reading a staging file")

// takeLocked returns the records of the next batch (they stay queued).
func (w *writeback) takeLocked() []*record {
	var bytes int64
	n := 0
	for n < len(w.queue) && n < wbBatch && bytes < wbBatchBytes {
		if w.queue[n].Staging != "" {
			if fi, err := os.Stat(filepath.Join(w.dir, w.queue[n].Staging)); err == nil {
				bytes += fi.Size()
			}
		}
		n++
	}
	return w.queue[:n]
}

// ops turns records into host ops, with the sources of their data;
// sizes[i] is how many ops record i became.
func (w *writeback) ops(batch []*record) ([]upstream.WBOp, []dataSrc, []int) {
	var ops []upstream.WBOp
	var srcs []dataSrc
	sizes := make([]int, len(batch))
	for i, r := range batch {
		before := len(ops)
		if n := len(ops); n > 0 && r.Staging == "" && mergeSetattr(&ops[n-1], &r.Op) {
			continue // sizes[i] is 0: the op before carries it
		}
		if r.Staging == "" {
			ops, srcs = append(ops, r.Op), append(srcs, dataSrc{})
		} else {
			o, s := w.dataOps(r)
			ops, srcs = append(ops, o...), append(srcs, s...)
		}
		sizes[i] = len(ops) - before
	}
	times := w.dirTimes(batch)
	return append(ops, times...), append(srcs, make([]dataSrc, len(times))...), sizes
}

// dirTimes returns ops that set the guest's times on the directories
// whose entries batch changes, by their paths as of the batch: the
// host's changed as it applied them. They come after every record's
// ops and are not the records' (finish looks no further): one that
// fails (its directory renamed or removed later in the batch) fails
// alone, and a later batch that changes the directory sets them again.
func (w *writeback) dirTimes(batch []*record) []upstream.WBOp {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ops []upstream.WBOp
	at := map[string]int{}
	for _, r := range batch {
		for i, p := range []string{r.Op.Path, r.Op.Path2} {
			d := r.dirs[i]
			if d == nil || d.local == nil {
				continue
			}
			dir := ""
			if j := strings.LastIndexByte(p, '/'); j >= 0 {
				dir = p[:j]
			}
			op := upstream.WBOp{Kind: upstream.WBSetattr, Path: dir, Valid: upstream.SetAtime | upstream.SetMtime,
				Atime: d.local.attr.Atime, Mtime: d.local.attr.Mtime}
			if k, ok := at[dir]; ok {
				ops[k] = op
				continue
			}
			at[dir] = len(ops)
			ops = append(ops, op)
		}
	}
	return ops
}

// mergeSetattr folds setattr op b into a, the op before it, if both
// change the attributes of one path and applying them as one (the
// server's order: size, mode, owner, times) ends the same as in turn:
// not a size change after others (truncation sets the times), not a
// set-id mode after an owner change (which drops set-id bits).
func mergeSetattr(a, b *upstream.WBOp) bool {
	if a.Kind != upstream.WBSetattr || b.Kind != upstream.WBSetattr || a.Path != b.Path {
		return false
	}
	if b.Valid&upstream.SetSize != 0 && a.Valid != 0 {
		return false
	}
	if b.Valid&upstream.SetMode != 0 && b.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 &&
		a.Valid&(upstream.SetUid|upstream.SetGid) != 0 {
		return false
	}
	a.Valid |= b.Valid
	if b.Valid&upstream.SetMode != 0 {
		a.Mode = b.Mode
	}
	if b.Valid&upstream.SetUid != 0 {
		a.Uid = b.Uid
	}
	if b.Valid&upstream.SetGid != 0 {
		a.Gid = b.Gid
	}
	if b.Valid&upstream.SetSize != 0 {
		a.Size = b.Size
	}
	if b.Valid&upstream.SetAtime != 0 {
		a.Atime = b.Atime
	}
	if b.Valid&upstream.SetMtime != 0 {
		a.Mtime = b.Mtime
	}
	return true
}

// dataOps turns a staging file into WBWrite ops of at most wbChunk
// bytes of its data ranges, holes left out; the first truncates to the
// size, the last sets the times. Where there are holes, an op before
// them truncates the host's file to nothing, so that none of its old
// bytes shows through a hole. Their data is read when sent. A staging
// file that is gone (written back and dropped already) is empty.
func (w *writeback) dataOps(r *record) ([]upstream.WBOp, []dataSrc) {
	path := filepath.Join(w.dir, r.Staging)
	size, ranges := dataRanges(path)
	var chunks []dataSrc
	covered := int64(0)
	for _, rg := range ranges {
		for off := rg[0]; off < rg[1]; off += wbChunk {
			chunks = append(chunks, dataSrc{path: path, off: off, n: min(wbChunk, rg[1]-off)})
		}
		covered += rg[1] - rg[0]
	}
	if len(chunks) == 0 {
		chunks = []dataSrc{{}}
	}
	base := r.Op
	base.Kind, base.Size, base.Valid = upstream.WBWrite, uint64(size), 0
	var ops []upstream.WBOp
	var srcs []dataSrc
	if covered < size {
		op := base
		op.First, op.Size = true, 0
		ops, srcs = append(ops, op), append(srcs, dataSrc{})
	}
	for i, c := range chunks {
		op := base
		op.Offset, op.First = c.off, i == 0
		if i == len(chunks)-1 {
			op.Valid = r.Op.Valid & (upstream.SetAtime | upstream.SetMtime)
		}
		ops, srcs = append(ops, op), append(srcs, c)
	}
	return ops, srcs
}

// finish records a batch's outcome and drops from the queue the records
// the host has or refused for good. It reports whether the host had no
// space for one: that record and the later ones stay queued.
func (w *writeback) finish(batch []*record, ops []upstream.WBOp, sizes []int, resp *upstream.ApplyResp, err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k, n := 0, 0
	for i, r := range batch {
		if j, errno := noSpace(resp, err, k, sizes[i]); errno != 0 {
			w.stallLocked(&ops[j], errno)
			break
		}
		if err == nil && k < len(resp.Inos) && resp.Inos[k] != 0 && r.node != nil && r.Op.Kind <= upstream.WBSymlink {
			w.fs.nodes.setIno(r.node, resp.Inos[k])
		}
		for j := 0; j < sizes[i]; j++ {
			errno := uint32(0)
			if err != nil {
				errno = uint32(errnoOf(err))
			} else if k < len(resp.Errnos) {
				errno = resp.Errnos[k]
			}
			if errno != 0 {
				w.failLocked(&ops[k], syscall.Errno(errno))
			} else {
				w.resolveLocked(&ops[k])
			}
			k++
		}
		w.doneLocked(r)
		n++
	}
	stalled := n < len(batch)
	if stalled {
		w.stalls++
	} else {
		w.stalled = nil
	}
	w.queue = w.queue[n:]
	if n > 0 {
		w.done = batch[n-1].Seq
	}
	w.stats.Batches++
	w.stats.Sent += uint64(n)
	w.stats.Pending = uint64(len(w.queue))
	if n > 0 {
		w.markDoneLocked()
	}
	w.cond.Broadcast()
	return stalled
}

// noSpace returns the first of count ops from k that the host refused
// for lack of space or another resource it may have later
// (upstream.WBStalls), with its errno, or 0.
func noSpace(resp *upstream.ApplyResp, err error, k, count int) (int, syscall.Errno) {
	if err != nil {
		return 0, 0
	}
	for j := k; j < k+count && j < len(resp.Errnos); j++ {
		if e := syscall.Errno(resp.Errnos[j]); upstream.WBStalls(e) {
			return j, e
		}
	}
	return 0, 0
}

// stallLocked records that the host has no space for op, reporting it
// once per stall.
func (w *writeback) stallLocked(op *upstream.WBOp, errno syscall.Errno) {
	f := Failure{Path: op.Path, Op: wbOpName(op.Kind), Errno: errno.Error()}
	if w.stalled == nil || *w.stalled != f {
		w.fs.opts.Logf("cachefs: write-back of %s %q waits for the host: %v", f.Op, f.Path, errno)
		if len(w.stats.Failures) < 1000 {
			w.stats.Failures = append(w.stats.Failures, f)
		}
	}
	w.stalled = &f
}

func (w *writeback) failLocked(op *upstream.WBOp, errno syscall.Errno) {
	f := Failure{Path: op.Path, Op: wbOpName(op.Kind), Errno: errno.Error()}
	w.fs.opts.Logf("cachefs: write-back of %s %q failed: %v", f.Op, f.Path, errno)
	if len(w.stats.Failures) < 1000 {
		w.stats.Failures = append(w.stats.Failures, f)
	}
	k := refusedKey(op)
	if _, ok := w.refused[k]; !ok && len(w.refused) >= maxRefused {
		w.unkept++
		return
	}
	w.refused[k] = f
}

// maxRefused bounds the standing refusals kept by path.
const maxRefused = 10000

// refusedKey is the path a refused op leaves different on the host from
// the guest: a rename's target, else its path.
func refusedKey(op *upstream.WBOp) string {
	if op.Kind == upstream.WBRename {
		return op.Path2
	}
	return op.Path
}

// resolveLocked drops the standing refusals that op, now on the host,
// supersedes: at its paths, and beneath them where it removed or moved
// a directory. Needs w.mu.
func (w *writeback) resolveLocked(op *upstream.WBOp) {
	if len(w.refused) == 0 {
		return
	}
	paths := []string{op.Path}
	if op.Kind == upstream.WBRename {
		paths = append(paths, op.Path2)
	}
	tree := op.Kind == upstream.WBRename || op.Kind == upstream.WBRmdir
	for _, p := range paths {
		delete(w.refused, p)
		if !tree {
			continue
		}
		for k := range w.refused {
			if strings.HasPrefix(k, p+"/") || p == "" {
				delete(w.refused, k)
			}
		}
	}
}

// standing waits like wait, then returns every refusal that stands, and
// the stall, sorted by path.
func (w *writeback) standing() []Failure {
	out := w.wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.refused {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b Failure) int { return strings.Compare(a.Path, b.Path) })
	if w.unkept > 0 {
		out = append(out, Failure{Op: "more", Errno: fmt.Sprintf("%d more refused changes, not kept by path", w.unkept)})
	}
	return out
}

// doneLocked releases what a record held once it is on the host.
func (w *writeback) doneLocked(r *record) {
	if r.node == nil || r.node.local == nil {
		if r.node == nil && r.Staging != "" { // replayed after a restart
			w.unrefReplayedLocked(r.Staging)
		}
		return
	}
	l := r.node.local
	l.pending--
	if l.pending == 0 && l.opens == 0 && l.staging != "" && l.children == nil {
		w.dropStagingLocked(r.node)
	}
}

// dropStagingLocked forgets a file's local copy: the host has it all and
// the node becomes an ordinary host node again.
func (w *writeback) dropStagingLocked(n *node) {
	l := n.local
	w.chargeLocked(l, 0)
	w.fds.forget(l.staging)
	w.dropped = append(w.dropped, l.staging)
	w.cond.Broadcast()
	n.local = nil
	// Host attributes cached before the write-back are stale now.
	if up, ok := w.fs.nodes.upOf(n, w.fs.up.Epoch()); ok && up != 0 {
		w.fs.cache.dropAttr(up)
	}
}

// hold stops (or restarts) sending, for tests of what waits.
func (w *writeback) hold(on bool) {
	w.mu.Lock()
	w.held = on
	w.mu.Unlock()
	w.cond.Broadcast()
}

// close stops the write-back; the journal keeps what was not sent, for
// the next daemon on this state directory.
func (w *writeback) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		w.closeJournalLocked()
		w.closeReadyLocked()
		w.fds.purge()
	}
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *writeback) snapshot() WritebackStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Ready = len(w.ready)
	s.Failures = append([]Failure(nil), s.Failures...)
	if w.stalled != nil {
		f := *w.stalled
		s.Stalled = &f
	}
	return s
}

// transient reports errors of the link, after which a batch is sent
// again rather than reported.
func transient(err error) bool {
	return errors.Is(err, syscall.EIO) || errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ETIMEDOUT) ||
		errors.Is(err, errStagingRead) ||
		errors.Is(err, upstream.ErrSessionLost) || errors.Is(err, syscall.EINTR)
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

func wbOpName(k uint8) string {
	names := []string{"", "mkdir", "create", "symlink", "write", "unlink", "rmdir", "rename", "setattr", "link"}
	if int(k) < len(names) {
		return names[k]
	}
	return "op"
}

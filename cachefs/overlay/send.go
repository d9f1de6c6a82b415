package overlay

import (
	"context"
	"syscall"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// Sending a pass's groups: their ops go in order, in batches of at most
// batchOps ops and batchBytes of data, each one call of the sender. One
// batch is in flight while the next is made (its files' data read), so
// the guest's reading and the host's applying overlap; a batch is sent
// only once the one before it is answered. The
// host applies a batch's ops in order; the ops of a group the host
// refused are reported and the group's state poisoned. A sender error
// leaves it unknown what the host applied: every group from that batch
// on is poisoned, to be planned again.

// Sender sends write-back ops to the host (upstream.OpApply) and
// returns an errno per op; an error means none is known to be applied.
type Sender func(ctx context.Context, ops []upstream.WBOp) ([]uint32, error)

const (
	batchOps   = 512
	batchBytes = 2 << 20
)

// Failure is a change the host refused.
type Failure struct {
	Path  string // relative to the subtree's root
	Op    string
	Errno syscall.Errno
}

// sendOut is what sending a pass did.
type sendOut struct {
	failed []Failure  // refused for good
	ok     []string   // paths of groups applied
	retry  bool       // some group may succeed later: no space, cancelled, data not read
	again  bool       // the plan left work for the next pass
	rescan []string   // directories the next pass scans whole (planner.rescan)
	reads  []fileRead // files whose data was read
	err    error      // the sender failed
	ops    int
	bytes  int64
}

type sender struct {
	upper  string
	ctx    context.Context
	send   Sender
	groups []*group
	errnos []syscall.Errno // per group: its first failure (0: none)
	ops    []upstream.WBOp
	owner  []int // group of each op
	bytes  int64
	out    sendOut
	flying *batch // sent, not yet answered
	spare  *batch // the slices of the last batch answered, for reuse
	arena  []byte // the data of the batch being made
	// the upper directory of the last file read, kept open for the
	// next: a pass's files come directory by directory
	dirPath string
	dirFD   int
}

// sendGroups sends groups and reports what happened.
func sendGroups(ctx context.Context, upper string, send Sender, groups []*group) sendOut {
	s := &sender{upper: upper, ctx: ctx, send: send, groups: groups, errnos: make([]syscall.Errno, len(groups)), dirFD: -1}
	defer s.closeDir()
	for gi := 0; gi < len(groups) && s.out.err == nil; gi++ {
		s.group(gi)
	}
	if s.out.err == nil {
		s.flush()
	}
	s.wait()
	s.finish()
	return s.out
}

// batch is a sent batch: its ops, the group of each, and the answer.
type batch struct {
	ops    []upstream.WBOp
	owner  []int
	bytes  int64
	arena  []byte
	errnos []uint32
	err    error
	done   chan struct{}
}

// group queues group gi's ops.
func (s *sender) group(gi int) {
	g := s.groups[gi]
	for _, st := range g.steps {
		if st.file == "" {
			s.add(gi, st.op)
			continue
		}
		if err := s.data(gi, st); err != nil {
			s.fail(gi)
		}
	}
}

// data queues the write ops of a file's data.
func (s *sender) data(gi int, st step) error {
	dir, name := splitPath(st.file)
	dfd, err := s.openDir(dir)
	if err != nil {
		return err
	}
	r, err := openData(dfd, name, st.op.Path)
	if err != nil {
		return err
	}
	defer r.close()
	for s.out.err == nil {
		op, ok, err := r.next(s.buffer)
		if err != nil || !ok {
			s.out.reads = append(s.out.reads, fileRead{path: st.file, written: r.written()})
			return err
		}
		s.add(gi, op)
	}
	return nil
}

// openDir returns upper directory dir, open until the next dir or the
// end of the pass. A directory moved meanwhile is read where it went:
// its files are those the scan saw, and the move's events bring the
// next pass.
func (s *sender) openDir(dir string) (int, error) {
	if s.dirFD >= 0 && s.dirPath == dir {
		return s.dirFD, nil
	}
	s.closeDir()
	fd, err := openDir(s.upper, dir)
	if err != nil {
		return -1, err
	}
	s.dirPath, s.dirFD = dir, fd
	return fd, nil
}

func (s *sender) closeDir() {
	if s.dirFD >= 0 {
		unix.Close(s.dirFD)
		s.dirFD = -1
	}
}

func (s *sender) add(gi int, op upstream.WBOp) {
	if s.full(len(op.Data)) {
		s.flush()
		if s.out.err != nil {
			return
		}
	}
	s.ops = append(s.ops, op)
	s.owner = append(s.owner, gi)
	s.bytes += int64(len(op.Data))
}

// flush sends the queued ops, once the batch before them is answered;
// not if that failed.
func (s *sender) flush() {
	if len(s.ops) == 0 {
		return
	}
	s.wait()
	if s.out.err != nil {
		return
	}
	b := &batch{ops: s.ops, owner: s.owner, bytes: s.bytes, arena: s.arena, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.errnos, b.err = s.send(s.ctx, b.ops)
	}()
	s.flying = b
	s.ops, s.owner, s.bytes, s.arena = nil, nil, 0, nil
	if s.spare != nil {
		s.ops, s.owner, s.arena = s.spare.ops[:0], s.spare.owner[:0], s.spare.arena[:0]
		s.spare = nil
	}
}

// buffer returns n bytes for the data of the next op, in the batch it
// will go in (the queued ops are sent first if it cannot go with them):
// a batch's data is one arena, reused once the batch is answered.
func (s *sender) buffer(n int) []byte {
	if s.full(n) {
		s.flush()
	}
	if s.arena == nil {
		s.arena = make([]byte, 0, batchBytes)
	}
	if len(s.arena)+n > cap(s.arena) {
		return make([]byte, n) // a batch's first op, larger than an arena
	}
	b := s.arena[len(s.arena) : len(s.arena)+n : len(s.arena)+n]
	s.arena = s.arena[:len(s.arena)+n]
	return b
}

// full reports whether an op with n bytes of data cannot join the
// queued ops.
func (s *sender) full(n int) bool {
	return len(s.ops) >= batchOps || s.bytes+int64(n) > batchBytes
}

// wait waits for the batch in flight and takes in its answer.
func (s *sender) wait() {
	b := s.flying
	if b == nil {
		return
	}
	<-b.done
	s.flying = nil
	err := b.err
	if err == nil && len(b.errnos) != len(b.ops) {
		err = syscall.EPROTO
	}
	if err != nil {
		s.out.err = err
		for gi := b.owner[0]; gi < len(s.groups); gi++ {
			s.errnos[gi] = syscall.ECANCELED
		}
		return
	}
	for i, e := range b.errnos {
		if e != 0 && s.errnos[b.owner[i]] == 0 {
			s.errnos[b.owner[i]] = syscall.Errno(e)
			s.out.failed = append(s.out.failed, Failure{Path: s.groups[b.owner[i]].path, Op: opName(b.ops[i].Kind), Errno: syscall.Errno(e)})
		}
	}
	s.out.ops += len(b.ops)
	s.out.bytes += b.bytes
	clear(b.ops) // no data kept alive
	s.spare = b
}

// fail marks group gi failed before its ops were sent: its data could
// not be read (the file changed or went since the scan).
func (s *sender) fail(gi int) {
	if s.errnos[gi] == 0 {
		s.errnos[gi] = syscall.EAGAIN
	}
	s.out.retry = true
}

// finish poisons the failed groups and sorts out the failures: those
// that may pass later are retried, not reported.
func (s *sender) finish() {
	index := map[*group]int{}
	for gi, g := range s.groups {
		index[g] = gi
		if g.after != nil && s.errnos[index[g.after]] != 0 && s.errnos[gi] == 0 {
			s.errnos[gi] = syscall.EAGAIN // its file's group failed
		}
		if s.errnos[gi] == 0 {
			s.out.ok = append(s.out.ok, g.path)
			continue
		}
		g.fail()
		if transient(s.errnos[gi]) {
			s.out.retry = true
		}
	}
	kept := s.out.failed[:0]
	for _, f := range s.out.failed {
		if f.Errno != syscall.ECANCELED {
			kept = append(kept, f)
		}
	}
	s.out.failed = kept
}

// transient reports errnos that may pass if the ops are sent again.
func transient(e syscall.Errno) bool {
	switch e {
	case syscall.ECANCELED, syscall.EAGAIN, syscall.EIO, syscall.EINTR:
		return true
	}
	return upstream.WBStalls(e)
}

func opName(k uint8) string {
	names := map[uint8]string{upstream.WBMkdir: "mkdir", upstream.WBCreate: "create", upstream.WBSymlink: "symlink",
		upstream.WBWrite: "write", upstream.WBUnlink: "unlink", upstream.WBRmdir: "rmdir", upstream.WBRename: "rename",
		upstream.WBSetattr: "setattr", upstream.WBLink: "link", upstream.WBMknod: "mknod", upstream.WBRemoveTree: "remove",
		upstream.WBMoveOver: "rename", upstream.WBXattrs: "setxattr"}
	if n, ok := names[k]; ok {
		return n
	}
	return "op"
}

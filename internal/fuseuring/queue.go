package fuseuring

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The FUSE ring protocol (include/uapi/linux/fuse.h, since 7.42).
const (
	opURingCmd        = 46 // IORING_OP_URING_CMD
	cmdRegister       = 1
	cmdCommitAndFetch = 2

	hdrOpIn       = 128 // fuse_uring_req_header.op_in: the opcode's fixed struct
	opInSize      = 128
	hdrCommitID   = 264 // fuse_uring_ent_in_out.commit_id
	hdrPayloadSz  = 272 // fuse_uring_ent_in_out.payload_sz
	hdrSize       = 288
	inHeaderSize  = 40
	outHeaderSize = 16

	opInit      = 26
	opSetLkW    = 33
	opInterrupt = 36
)

// Options configure Start.
type Options struct {
	// Depth is the number of entries per queue; 0 means 4.
	Depth int
	// Payload is the size of an entry's payload buffer: at least the
	// mount's MaxWrite plus a page. 0 means 1 MiB + 4 KiB.
	Payload int
	// Logf reports a queue that stopped for another reason than the
	// unmount. Nil: discarded.
	Logf func(format string, args ...any)
}

// Rings are the queues serving one mount.
type Rings struct {
	requests atomic.Uint64
	wg       sync.WaitGroup
}

// Requests returns how many requests the rings have answered.
func (r *Rings) Requests() uint64 { return r.requests.Load() }

// Wait waits until every queue has stopped (at unmount).
func (r *Rings) Wait() { r.wg.Wait() }

// Supported reports why FUSE over io_uring cannot be used here, or nil.
func Supported() error {
	b, err := os.ReadFile("/sys/module/fuse/parameters/enable_uring")
	if err != nil {
		return fmt.Errorf("this kernel has no FUSE over io_uring: %w", err)
	}
	if len(b) == 0 || b[0] != 'Y' {
		return errors.New("FUSE over io_uring is off (echo Y > /sys/module/fuse/parameters/enable_uring)")
	}
	r, err := newRing(1)
	if err != nil {
		return err
	}
	r.close()
	return nil
}

// FDs returns the process's descriptors of /dev/fuse: the one a mount
// made is the one new across its fuse.NewServer.
func FDs() map[int]bool {
	out := map[int]bool{}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); l == "/dev/fuse" {
			n, _ := strconv.Atoi(e.Name())
			out[n] = true
		}
	}
	return out
}

// NewFD returns the /dev/fuse descriptor opened since FDs returned
// before, or -1 if none was.
func NewFD(before map[int]bool) int {
	for n := range FDs() {
		if !before[n] {
			return n
		}
	}
	return -1
}

// Start serves the mount whose /dev/fuse descriptor is fd, and whose
// INIT go-fuse answered with kernel settings ki, over one queue per CPU
// answered by ps.
func Start(fd int, ki *fuse.InitIn, ps *fuse.ProtocolServer, o Options) (*Rings, error) {
	if ki.Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		return nil, errors.New("the kernel did not offer FUSE over io_uring")
	}
	if o.Depth == 0 {
		o.Depth = 4
	}
	if o.Payload == 0 {
		o.Payload = 1<<20 + 4096
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if err := replayInit(ps, ki); err != nil {
		return nil, err
	}
	rs := &Rings{}
	for cpu := 0; cpu < runtime.NumCPU(); cpu++ {
		q := &queue{id: cpu, fd: fd, ps: ps, opts: o, rings: rs}
		ready := make(chan error)
		rs.wg.Add(1)
		go q.serve(ready)
		if err := <-ready; err != nil {
			return nil, fmt.Errorf("ring queue %d: %w", cpu, err)
		}
	}
	return rs, nil
}

// replayInit gives ps the INIT go-fuse answered: it parses requests by
// the negotiated protocol.
func replayInit(ps *fuse.ProtocolServer, ki *fuse.InitIn) error {
	in := *ki
	in.InHeader = fuse.InHeader{Length: uint32(unsafe.Sizeof(in)), Opcode: opInit, Unique: 1}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&in)), unsafe.Sizeof(in))
	if _, st := ps.HandleRequest([][]byte{b}, [][]byte{make([]byte, 4096)}); !st.Ok() {
		return fmt.Errorf("INIT for the ring dispatcher: %v", st)
	}
	return nil
}

// queue is one CPU's ring queue.
type queue struct {
	id, fd int
	ps     *fuse.ProtocolServer
	opts   Options
	rings  *Rings
	ents   []*entry
	r      *ring

	mu      sync.Mutex // protects the submission queue (nextSQE) and pending
	pending uint32     // commits queued by other goroutines, not yet submitted
}

type entry struct {
	hdr, payload []byte
	iov          [2]unix.Iovec
}

// serve registers the queue from a thread pinned to its CPU and answers
// requests until the mount goes (the kernel then fails the commands).
func (q *queue) serve(ready chan<- error) {
	defer q.rings.wg.Done()
	runtime.LockOSThread()
	err := q.register()
	ready <- err
	if err != nil {
		return
	}
	defer q.r.close()
	n := q.takePending()
	for {
		if err := q.r.enter(n, 1); err != nil {
			q.opts.Logf("fuseuring: queue %d: %v", q.id, err)
			return
		}
		stop := false
		q.r.completions(func(user uint64, res int32) {
			switch {
			case res < 0:
				if res != -int32(syscall.ENOTCONN) {
					q.opts.Logf("fuseuring: queue %d: %v", q.id, syscall.Errno(-res))
				}
				stop = true
			case !stop:
				q.answer(q.ents[user], user)
			}
		})
		if stop {
			return
		}
		n = q.takePending()
	}
}

// takePending returns how many queued commands wait to be submitted,
// and counts them as submitted.
func (q *queue) takePending() uint32 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.takePendingLocked()
}

func (q *queue) takePendingLocked() uint32 {
	n := q.pending
	q.pending = 0
	return n
}

func (q *queue) register() error {
	var set unix.CPUSet
	set.Set(q.id)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return err
	}
	r, err := newRing(uint32(2 * q.opts.Depth))
	if err != nil {
		return err
	}
	q.r = r
	for i := 0; i < q.opts.Depth; i++ {
		e, err := newEntry(q.opts.Payload)
		if err != nil {
			r.close()
			return err
		}
		q.ents = append(q.ents, e)
		sqe := r.nextSQE()
		q.prepCmd(sqe, cmdRegister, uint64(i), 0)
		*(*uint64)(unsafe.Pointer(&sqe[16])) = uint64(uintptr(unsafe.Pointer(&e.iov[0])))
		*(*uint32)(unsafe.Pointer(&sqe[24])) = 2
		q.pending++
	}
	return nil
}

func newEntry(payload int) (*entry, error) {
	hdr, err := anonymous(4096) // page-aligned: the kernel pins it
	if err != nil {
		return nil, err
	}
	p, err := anonymous(payload)
	if err != nil {
		unix.Munmap(hdr)
		return nil, err
	}
	e := &entry{hdr: hdr, payload: p}
	e.iov[0].Base, e.iov[1].Base = &hdr[0], &p[0]
	e.iov[0].SetLen(hdrSize)
	e.iov[1].SetLen(payload)
	return e, nil
}

func anonymous(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
}

// prepCmd fills sqe with a FUSE ring command; fuse_uring_cmd_req is in
// the SQE128 command area at byte 48.
func (q *queue) prepCmd(sqe []byte, cmd uint32, user, commit uint64) {
	sqe[0] = opURingCmd
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(q.fd)
	*(*uint32)(unsafe.Pointer(&sqe[8])) = cmd
	*(*uint64)(unsafe.Pointer(&sqe[32])) = user
	*(*uint64)(unsafe.Pointer(&sqe[56])) = commit
	*(*uint16)(unsafe.Pointer(&sqe[64])) = uint16(q.id)
}

// answer answers the request in entry e (index user) and queues its
// commit; a blocking lock is answered from its own goroutine.
func (q *queue) answer(e *entry, user uint64) {
	h := (*fuse.InHeader)(unsafe.Pointer(&e.hdr[0]))
	if h.Opcode != opSetLkW {
		q.commit(e, user, false)
		return
	}
	go func() {
		stop := q.watchSignals(h.Unique, h.Pid)
		q.commit(e, user, true)
		stop()
	}()
}

// commit answers the request in e and queues COMMIT_AND_FETCH; from
// another goroutine than the queue's (async) it also submits it.
func (q *queue) commit(e *entry, user uint64, async bool) {
	c := serveEntry(q.ps, e)
	q.rings.requests.Add(1)
	q.mu.Lock()
	q.prepCmd(q.r.nextSQE(), cmdCommitAndFetch, user, c)
	q.pending++
	if async {
		n := q.takePendingLocked()
		err := q.r.enter(n, 0)
		q.mu.Unlock()
		if err != nil {
			q.opts.Logf("fuseuring: queue %d: commit: %v", q.id, err)
		}
		return
	}
	q.mu.Unlock()
}

// serveEntry answers the request in e with ps and returns its commit
// id. The opcode's fixed struct is what the header's length leaves after
// the header and the payload.
func serveEntry(ps *fuse.ProtocolServer, e *entry) uint64 {
	h := (*fuse.InHeader)(unsafe.Pointer(&e.hdr[0]))
	unique := h.Unique
	commit := *(*uint64)(unsafe.Pointer(&e.hdr[hdrCommitID]))
	psz := int(*(*uint32)(unsafe.Pointer(&e.hdr[hdrPayloadSz])))
	opsz := int(h.Length) - inHeaderSize - psz
	n := 0
	if opsz >= 0 && opsz <= opInSize && psz <= len(e.payload) {
		in := [][]byte{e.hdr[:inHeaderSize], e.hdr[hdrOpIn : hdrOpIn+opsz], e.payload[:psz]}
		out := [][]byte{e.hdr[:outHeaderSize], e.payload}
		n, _ = ps.HandleRequest(in, out)
	}
	if n < outHeaderSize { // malformed, or no reply written: EIO
		*(*fuse.OutHeader)(unsafe.Pointer(&e.hdr[0])) = fuse.OutHeader{Length: outHeaderSize, Status: -int32(syscall.EIO), Unique: unique}
		n = outHeaderSize
	}
	*(*uint32)(unsafe.Pointer(&e.hdr[hdrPayloadSz])) = uint32(n - outHeaderSize)
	return commit
}

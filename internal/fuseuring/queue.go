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

	opPollAdd = 6          // IORING_OP_POLL_ADD
	wakeUser  = ^uint64(0) // user data of the wake-up poll
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

// queue is one CPU's ring queue. Only its own thread submits to its
// ring: the kernel hands a request to an idle entry in the context of
// the thread that submitted the entry's last command (a task_work),
// which must not be a thread that may itself wait for a request
// (see Submitting in doc.go).
type queue struct {
	id, fd int
	ps     *fuse.ProtocolServer
	opts   Options
	rings  *Rings
	ents   []*entry
	r      *ring
	wake   int // eventfd that other goroutines write to wake the queue's thread

	mu      sync.Mutex // protects the submission queue (nextSQE), pending and stopped
	pending uint32     // commands queued, not yet submitted
	stopped bool       // the ring is closed
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
	defer q.close()
	n := q.takePending()
	for {
		if err := q.r.enter(n, 1); err != nil {
			q.opts.Logf("fuseuring: queue %d: %v", q.id, err)
			return
		}
		stop := false
		q.r.completions(func(user uint64, res int32) {
			switch {
			case user == wakeUser:
				q.woken(res)
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

// close closes the ring and the wake-up eventfd; later commits are
// dropped (the kernel failed their requests when the mount went).
func (q *queue) close() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	q.r.close()
	unix.Close(q.wake)
}

// takePending returns how many queued commands wait to be submitted,
// and counts them as submitted.
func (q *queue) takePending() uint32 {
	q.mu.Lock()
	defer q.mu.Unlock()
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
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	r, err := newRing(uint32(2 * q.opts.Depth))
	if err != nil {
		unix.Close(wake)
		return err
	}
	q.r, q.wake = r, wake
	q.armWakeLocked()
	for i := 0; i < q.opts.Depth; i++ {
		e, err := newEntry(q.opts.Payload)
		if err != nil {
			q.close()
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
// another goroutine than the queue's (async) it wakes the queue's
// thread to submit it.
func (q *queue) commit(e *entry, user uint64, async bool) {
	c := serveEntry(q.ps, e)
	q.rings.requests.Add(1)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return
	}
	q.prepCmd(q.r.nextSQE(), cmdCommitAndFetch, user, c)
	q.pending++
	if async {
		q.wakeLocked()
	}
}

// wakeLocked wakes the queue's thread: the poll of q.wake completes.
// Needs mu (q.wake is open).
func (q *queue) wakeLocked() {
	one := [8]byte{1}
	if _, err := unix.Write(q.wake, one[:]); err != nil && err != unix.EAGAIN {
		q.opts.Logf("fuseuring: queue %d: wake: %v", q.id, err)
	}
}

// armWakeLocked queues a poll of q.wake, whose completion wakes the
// queue's thread. Needs mu, or no other goroutine yet.
func (q *queue) armWakeLocked() {
	sqe := q.r.nextSQE()
	sqe[0] = opPollAdd
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(q.wake)
	*(*uint32)(unsafe.Pointer(&sqe[28])) = unix.POLLIN // poll32_events
	*(*uint64)(unsafe.Pointer(&sqe[32])) = wakeUser
	q.pending++
}

// woken handles the wake-up poll's completion, with result res, on the
// queue's thread: it empties the eventfd and polls it again; the
// commits queued meanwhile go with the next submission.
func (q *queue) woken(res int32) {
	if res < 0 {
		q.opts.Logf("fuseuring: queue %d: wake-up poll: %v", q.id, syscall.Errno(-res))
	}
	var b [8]byte
	unix.Read(q.wake, b[:])
	q.mu.Lock()
	q.armWakeLocked()
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

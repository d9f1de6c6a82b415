package fuseuring

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A minimal io_uring: setup, the three mappings, and submission and
// completion with the kernel's head and tail indexes. SQEs are 128
// bytes (IORING_SETUP_SQE128), as FUSE's ring commands need.

const (
	setupCQSize   = 1 << 3
	setupSQE128   = 1 << 10
	enterGetEvent = 1
	offSQRing     = 0
	offCQRing     = 0x8000000
	offSQEs       = 0x10000000
	sqeSize       = 128
	cqeSize       = 16
)

type sqOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

type cqOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

type ringParams struct {
	SqEntries, CqEntries, Flags, SqThreadCPU, SqThreadIdle, Features, WqFd uint32
	Resv                                                                   [3]uint32
	SqOff                                                                  sqOffsets
	CqOff                                                                  cqOffsets
}

type ring struct {
	fd                              int
	sq, cq, sqes                    []byte
	sqHead, sqTail, sqMask, sqArray *uint32
	cqHead, cqTail, cqMask          *uint32
	cqes                            unsafe.Pointer
}

func newRing(entries uint32) (*ring, error) {
	p := ringParams{Flags: setupSQE128 | setupCQSize, CqEntries: 2 * entries}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	if err := r.mapRings(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) mapRings(p *ringParams) error {
	var err error
	prot, flags := unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE
	if r.sq, err = unix.Mmap(r.fd, offSQRing, int(p.SqOff.Array+4*p.SqEntries), prot, flags); err != nil {
		return fmt.Errorf("mmap SQ ring: %w", err)
	}
	if r.cq, err = unix.Mmap(r.fd, offCQRing, int(p.CqOff.Cqes+cqeSize*p.CqEntries), prot, flags); err != nil {
		return fmt.Errorf("mmap CQ ring: %w", err)
	}
	if r.sqes, err = unix.Mmap(r.fd, offSQEs, int(sqeSize*p.SqEntries), prot, flags); err != nil {
		return fmt.Errorf("mmap SQEs: %w", err)
	}
	at := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	r.sqHead, r.sqTail, r.sqMask, r.sqArray = at(r.sq, p.SqOff.Head), at(r.sq, p.SqOff.Tail), at(r.sq, p.SqOff.RingMask), at(r.sq, p.SqOff.Array)
	r.cqHead, r.cqTail, r.cqMask = at(r.cq, p.CqOff.Head), at(r.cq, p.CqOff.Tail), at(r.cq, p.CqOff.RingMask)
	r.cqes = unsafe.Pointer(&r.cq[p.CqOff.Cqes])
	return nil
}

func (r *ring) close() {
	for _, b := range [][]byte{r.sq, r.cq, r.sqes} {
		if b != nil {
			unix.Munmap(b)
		}
	}
	unix.Close(r.fd)
}

// nextSQE returns the next submission entry, zeroed and queued for the
// next enter.
func (r *ring) nextSQE() []byte {
	tail := atomic.LoadUint32(r.sqTail)
	idx := tail & *r.sqMask
	sqe := r.sqes[idx*sqeSize : (idx+1)*sqeSize]
	clear(sqe)
	*(*uint32)(unsafe.Add(unsafe.Pointer(r.sqArray), 4*idx)) = idx
	atomic.StoreUint32(r.sqTail, tail+1)
	return sqe
}

// enter submits n entries and waits for at least wait completions.
func (r *ring) enter(n, wait uint32) error {
	for {
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), uintptr(wait), enterGetEvent, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			n = 0 // submitted before the signal
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// pop returns the next completion's user data and result and releases
// it; ok is false if there is none.
func (r *ring) pop() (user uint64, res int32, ok bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return 0, 0, false
	}
	cqe := unsafe.Add(r.cqes, cqeSize*(head&*r.cqMask))
	user, res = *(*uint64)(cqe), *(*int32)(unsafe.Add(cqe, 8))
	atomic.StoreUint32(r.cqHead, head+1)
	return user, res, true
}

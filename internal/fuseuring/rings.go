package fuseuring

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
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

// maxEntries bounds the entries of one queue: those waiting for a
// request and those holding one that was handed off (Handoff in doc.go).
const maxEntries = 256

// Options configure Start.
type Options struct {
	// Depth is the number of entries per queue that wait for requests,
	// beyond those holding a request that was handed off; 0 means 16.
	// More requests than that at once from one CPU wait in the kernel
	// until one of the queue's requests is answered. Queues of CPUs the
	// daemon may not run on get one.
	Depth int
	// Payload is the size of an entry's payload buffer: at least the
	// mount's MaxWrite plus a page. 0 means 1 MiB + 4 KiB.
	Payload int
	// HandOff is how long a queue's thread answers one request before
	// another thread takes the queue over, so that the requests behind
	// it are not held up (Handoff in doc.go). 0 means DefaultHandOff.
	HandOff time.Duration
	// Logf reports a queue that stopped for another reason than the
	// unmount. Nil: discarded.
	Logf func(format string, args ...any)
}

// DefaultHandOff is Options.HandOff's default: far above a request the
// daemon answers from memory (a few microseconds), and about what a
// Go timer can resolve when the daemon is idle (its netpoller sleeps in
// whole milliseconds).
const DefaultHandOff = time.Millisecond

// Rings are the queues serving one mount.
type Rings struct {
	requests atomic.Uint64
	handoffs atomic.Uint64
	wg       sync.WaitGroup // one per thread serving or waiting to serve a queue
}

// Requests returns how many requests the rings have answered.
func (r *Rings) Requests() uint64 { return r.requests.Load() }

// HandOffs returns how many times a queue's thread took longer than
// Options.HandOff over a request and another took the queue over.
func (r *Rings) HandOffs() uint64 { return r.handoffs.Load() }

// Wait waits until every queue has stopped (at unmount) and its threads
// have finished their requests.
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
	if _, err := possibleCPUs(); err != nil {
		return err
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
// INIT go-fuse answered with kernel settings ki, over one queue per
// possible CPU (the kernel serves none until each has an entry)
// answered by ps.
func Start(fd int, ki *fuse.InitIn, ps *fuse.ProtocolServer, o Options) (*Rings, error) {
	if ki.Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		return nil, errors.New("the kernel did not offer FUSE over io_uring")
	}
	o.setDefaults()
	cpus, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	if err := replayInit(ps, ki); err != nil {
		return nil, err
	}
	allowed := allowedCPUs()
	rs := &Rings{}
	for cpu := 0; cpu < cpus; cpu++ {
		q := newQueue(cpu, fd, ps, o, rs, allowed == nil || allowed[cpu])
		if err := q.start(); err != nil {
			return nil, fmt.Errorf("ring queue %d: %w", cpu, err)
		}
	}
	return rs, nil
}

func (o *Options) setDefaults() {
	if o.Depth == 0 {
		o.Depth = 16
	}
	if o.Payload == 0 {
		o.Payload = 1<<20 + 4096
	}
	if o.HandOff == 0 {
		o.HandOff = DefaultHandOff
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
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

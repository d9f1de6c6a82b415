package main

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FUSE over io_uring (Linux 6.14+, include/uapi/linux/fuse.h). Each
// ring entry has a header buffer (struct fuse_uring_req_header: the
// fuse_in_header or fuse_out_header in in_out, the opcode's fixed input
// struct in op_in, then fuse_uring_ent_in_out) and a payload buffer
// (names, data, and the whole reply but its header). An entry is
// registered with IORING_OP_URING_CMD FUSE_IO_URING_CMD_REGISTER, which
// completes when a request is put in it; the reply goes back with
// COMMIT_AND_FETCH, which completes with the next request.

const (
	opURingCmd        = 46 // IORING_OP_URING_CMD
	cmdRegister       = 1
	cmdCommitAndFetch = 2

	hdrInOut      = 0   // fuse_in_header / fuse_out_header
	hdrOpIn       = 128 // the opcode's fixed struct
	hdrCommitID   = 264 // fuse_uring_ent_in_out.commit_id
	hdrPayloadSz  = 272 // fuse_uring_ent_in_out.payload_sz
	opInSize      = 128
	hdrSize       = 288
	inHeaderSize  = 40
	outHeaderSize = 16

	payloadSize = 1<<20 + 4096 // at least the mount's max_write and max_pages
	queueDepth  = 2            // entries per queue
)

// ringSupported reports why FUSE over io_uring cannot be used here.
func ringSupported() error {
	b, err := os.ReadFile("/sys/module/fuse/parameters/enable_uring")
	if err != nil {
		return fmt.Errorf("this kernel has no FUSE over io_uring: %w", err)
	}
	if len(b) == 0 || b[0] != 'Y' {
		return errors.New("FUSE over io_uring is off: echo Y > /sys/module/fuse/parameters/enable_uring")
	}
	r, err := newRing(1)
	if err != nil {
		return err
	}
	r.close()
	return nil
}

// fuseFDs returns this process's descriptors of /dev/fuse.
func fuseFDs() map[int]bool {
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

// startRings registers a queue per CPU for the mount srv made: its
// /dev/fuse descriptor is the one that is new since before. The INIT
// the server answered is replayed to a ProtocolServer, which needs the
// negotiated settings to parse requests.
func startRings(srv *fuse.Server, fs fuse.RawFileSystem, opts *fuse.MountOptions, before map[int]bool) error {
	if srv.KernelSettings().Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		return errors.New("the kernel did not offer FUSE over io_uring")
	}
	fd := -1
	for n := range fuseFDs() {
		if !before[n] {
			fd = n
		}
	}
	if fd < 0 {
		return errors.New("no new /dev/fuse descriptor")
	}
	ps := fuse.NewProtocolServer(fs, opts)
	if err := replayInit(ps, srv.KernelSettings()); err != nil {
		return err
	}
	for q := 0; q < runtime.NumCPU(); q++ {
		ready := make(chan error)
		go serveQueue(q, fd, ps, ready)
		if err := <-ready; err != nil {
			return fmt.Errorf("queue %d: %w", q, err)
		}
	}
	return nil
}

func replayInit(ps *fuse.ProtocolServer, ki *fuse.InitIn) error {
	in := *ki
	in.InHeader = fuse.InHeader{Length: uint32(unsafe.Sizeof(in)), Opcode: 26, Unique: 1} // FUSE_INIT
	b := unsafe.Slice((*byte)(unsafe.Pointer(&in)), unsafe.Sizeof(in))
	if _, st := ps.HandleRequest([][]byte{b}, [][]byte{make([]byte, 4096)}); !st.Ok() {
		return fmt.Errorf("INIT for the ring dispatcher: %v", st)
	}
	return nil
}

type entry struct {
	hdr, payload []byte
	iov          [2]unix.Iovec
}

func newEntry() (*entry, error) {
	hdr, err := anonymous(4096) // page-aligned: the kernel pins it
	if err != nil {
		return nil, err
	}
	payload, err := anonymous(payloadSize)
	if err != nil {
		return nil, err
	}
	e := &entry{hdr: hdr, payload: payload}
	e.iov[0].Base, e.iov[1].Base = &hdr[0], &payload[0]
	e.iov[0].SetLen(hdrSize)
	e.iov[1].SetLen(payloadSize)
	return e, nil
}

func anonymous(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
}

// prepCmd fills sqe with a FUSE ring command; fuse_uring_cmd_req goes
// in the SQE128 command area at byte 48.
func prepCmd(sqe []byte, fusefd int, cmd uint32, user uint64, qid uint16, commit uint64) {
	sqe[0] = opURingCmd
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(fusefd)
	*(*uint32)(unsafe.Pointer(&sqe[8])) = cmd
	*(*uint64)(unsafe.Pointer(&sqe[32])) = user
	*(*uint64)(unsafe.Pointer(&sqe[56])) = commit
	*(*uint16)(unsafe.Pointer(&sqe[64])) = qid
}

// serveQueue serves queue qid from a thread pinned to CPU qid, until
// the mount goes (the kernel fails the pending commands then).
func serveQueue(qid, fusefd int, ps *fuse.ProtocolServer, ready chan<- error) {
	runtime.LockOSThread()
	r, ents, err := registerQueue(qid, fusefd)
	ready <- err
	if err != nil {
		return
	}
	defer r.close()
	for n := uint32(len(ents)); ; {
		if err := r.enter(n, 1); err != nil {
			log.Printf("queue %d: %v", qid, err)
			return
		}
		n = 0
		done := false
		r.completions(func(user uint64, res int32) {
			if res < 0 {
				done = true // ENOTCONN at unmount
				return
			}
			e := ents[user]
			commit := serveEntry(ps, e)
			prepCmd(r.nextSQE(), fusefd, cmdCommitAndFetch, user, uint16(qid), commit)
			n++
		})
		if done {
			return
		}
	}
}

func registerQueue(qid, fusefd int) (*ring, []*entry, error) {
	var set unix.CPUSet
	set.Set(qid)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, nil, err
	}
	r, err := newRing(2 * queueDepth)
	if err != nil {
		return nil, nil, err
	}
	ents := make([]*entry, queueDepth)
	for i := range ents {
		if ents[i], err = newEntry(); err != nil {
			r.close()
			return nil, nil, err
		}
		sqe := r.nextSQE()
		prepCmd(sqe, fusefd, cmdRegister, uint64(i), uint16(qid), 0)
		*(*uint64)(unsafe.Pointer(&sqe[16])) = uint64(uintptr(unsafe.Pointer(&ents[i].iov[0])))
		*(*uint32)(unsafe.Pointer(&sqe[24])) = 2
	}
	return r, ents, nil
}

// serveEntry answers the request in e and returns its commit id. The op
// struct's size is what the header's length leaves after the header and
// the payload.
func serveEntry(ps *fuse.ProtocolServer, e *entry) uint64 {
	h := (*fuse.InHeader)(unsafe.Pointer(&e.hdr[hdrInOut]))
	commit := *(*uint64)(unsafe.Pointer(&e.hdr[hdrCommitID]))
	psz := int(*(*uint32)(unsafe.Pointer(&e.hdr[hdrPayloadSz])))
	opsz := int(h.Length) - inHeaderSize - psz
	if opsz < 0 || opsz > opInSize || psz > payloadSize {
		opsz, psz = 0, 0 // malformed: go-fuse answers EIO
	}
	in := [][]byte{e.hdr[:inHeaderSize], e.hdr[hdrOpIn : hdrOpIn+opsz], e.payload[:psz]}
	out := [][]byte{e.hdr[:outHeaderSize], e.payload}
	n, _ := ps.HandleRequest(in, out)
	if n < outHeaderSize { // no reply written: answer EIO
		oh := (*fuse.OutHeader)(unsafe.Pointer(&e.hdr[0]))
		*oh = fuse.OutHeader{Length: outHeaderSize, Status: -int32(syscall.EIO), Unique: h.Unique}
		n = outHeaderSize
	}
	*(*uint32)(unsafe.Pointer(&e.hdr[hdrPayloadSz])) = uint32(n - outHeaderSize)
	return commit
}

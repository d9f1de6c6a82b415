package fuseuring

import (
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// An entry is a ring entry's buffers: a header buffer (the request's
// fuse_in_header, the opcode's fixed struct, and the entry's commit id
// and payload size) and a payload buffer (names, data; on the way back
// the whole reply but its header).
type entry struct {
	hdr, payload []byte
	iov          [2]unix.Iovec
}

// newEntry maps an entry's buffers. The payload's pages are faulted in
// as they are used: the kernel hands requests to the entry that waited
// least (its list of free entries is a stack), so few entries are ever
// touched beyond their header.
func newEntry(payload int) (*entry, error) {
	hdr, err := anonymous(4096, true)
	if err != nil {
		return nil, err
	}
	p, err := anonymous(payload, false)
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

func anonymous(n int, populate bool) ([]byte, error) {
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if populate {
		flags |= unix.MAP_POPULATE
	}
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, flags)
}

// opcode returns the opcode of the request in e.
func (e *entry) opcode() uint32 {
	return (*fuse.InHeader)(unsafe.Pointer(&e.hdr[0])).Opcode
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

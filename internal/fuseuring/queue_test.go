package fuseuring

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
)

type xattrFS struct{ fuse.RawFileSystem }

func (xattrFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if attr != "user.present" {
		return 0, fuse.ENOATTR
	}
	return uint32(copy(dest, "value")), fuse.OK
}

// testEntry lays out a GETXATTR of name as the kernel puts it in a ring
// entry: header in in_out, fuse_getxattr_in in op_in, name in the
// payload; length is the header's length field.
func testEntry(t testing.TB, name string, size uint32, length func(op, payload int) int) *entry {
	e := &entry{hdr: make([]byte, 4096), payload: make([]byte, 1<<16)}
	n := copy(e.payload, name+"\x00")
	op := int(unsafe.Sizeof(fuse.GetXAttrIn{}) - unsafe.Sizeof(fuse.InHeader{}))
	*(*fuse.InHeader)(unsafe.Pointer(&e.hdr[0])) = fuse.InHeader{
		Length: uint32(length(op, n)), Opcode: 22, Unique: 42, NodeId: fuse.FUSE_ROOT_ID}
	*(*uint32)(unsafe.Pointer(&e.hdr[hdrOpIn])) = size // fuse_getxattr_in.size
	*(*uint64)(unsafe.Pointer(&e.hdr[hdrCommitID])) = 7
	*(*uint32)(unsafe.Pointer(&e.hdr[hdrPayloadSz])) = uint32(n)
	return e
}

func newPS(t testing.TB) *fuse.ProtocolServer {
	ps := fuse.NewProtocolServer(xattrFS{fuse.NewDefaultRawFileSystem()}, &fuse.MountOptions{})
	ki := fuse.InitIn{Major: 7, Minor: 41}
	if err := replayInit(ps, &ki); err != nil {
		t.Fatal(err)
	}
	return ps
}

func reply(e *entry) (fuse.OutHeader, []byte) {
	oh := *(*fuse.OutHeader)(unsafe.Pointer(&e.hdr[0]))
	n := *(*uint32)(unsafe.Pointer(&e.hdr[hdrPayloadSz]))
	return oh, e.payload[:n]
}

// TestServeEntry: a request in ring layout is answered in ring layout,
// the reply's header in in_out and the rest in the payload, with the
// commit id the kernel gave.
func TestServeEntry(t *testing.T) {
	ps := newPS(t)
	whole := func(op, payload int) int { return inHeaderSize + op + payload }
	e := testEntry(t, "user.present", 64, whole)
	if c := serveEntry(ps, e); c != 7 {
		t.Errorf("commit id %d, want 7", c)
	}
	oh, p := reply(e)
	if oh.Status != 0 || oh.Unique != 42 || string(p) != "value" {
		t.Errorf("reply %+v %q, want status 0, unique 42, %q", oh, p, "value")
	}
	e = testEntry(t, "user.missing", 64, whole)
	serveEntry(ps, e)
	if oh, p := reply(e); oh.Status != -int32(syscall.ENODATA) || len(p) != 0 {
		t.Errorf("reply %+v %q, want ENODATA and no payload", oh, p)
	}
}

// TestServeEntryMalformed: a header length that leaves no room for the
// opcode's struct, or claims more than op_in holds, is answered EIO.
func TestServeEntryMalformed(t *testing.T) {
	ps := newPS(t)
	for name, length := range map[string]func(op, payload int) int{
		"short": func(op, payload int) int { return inHeaderSize + payload - 1 },
		"long":  func(op, payload int) int { return inHeaderSize + opInSize + 8 + payload },
	} {
		e := testEntry(t, "user.present", 64, length)
		serveEntry(ps, e)
		if oh, p := reply(e); oh.Status != -int32(syscall.EIO) || oh.Unique != 42 || len(p) != 0 {
			t.Errorf("%s: reply %+v %q, want EIO for unique 42", name, oh, p)
		}
	}
}

// BenchmarkServeEntry: the dispatch of one request, a GETXATTR answered
// from memory, without the kernel.
func BenchmarkServeEntry(b *testing.B) {
	ps := newPS(b)
	e := testEntry(b, "user.present", 64, func(op, payload int) int { return inHeaderSize + op + payload })
	hdr := append([]byte(nil), e.hdr[:hdrSize]...) // the reply overwrites it
	b.ReportAllocs()
	for b.Loop() {
		copy(e.hdr, hdr)
		serveEntry(ps, e)
	}
}

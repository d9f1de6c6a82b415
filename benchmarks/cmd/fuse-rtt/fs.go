package main

import (
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// rttFS answers the requests the measurement sends, from memory: the
// root directory, one file of rttFileSize zero bytes, empty files named
// by rttName, and no other names or attributes.
type rttFS struct{ fuse.RawFileSystem }

const (
	rttFile     = "rtt-file"
	rttFileSize = 4096
	rttFileID   = 2
)

// GetAttr's answers may be kept, as cachefs's cached mode's: with
// -default-permissions the kernel checks the root's attributes at each
// path walk, and would ask again each time.
func (rttFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	out.SetTimeout(time.Hour)
	return attr(in.NodeId, &out.Attr)
}

func attr(id uint64, out *fuse.Attr) fuse.Status {
	switch {
	case id == fuse.FUSE_ROOT_ID:
		out.Mode, out.Nlink, out.Ino = syscall.S_IFDIR|0o755, 2, 1
	case id == rttFileID:
		out.Mode, out.Nlink, out.Ino, out.Size = syscall.S_IFREG|0o644, 1, rttFileID, rttFileSize
	case id >= firstNamedID:
		out.Mode, out.Nlink, out.Ino = syscall.S_IFREG|0o644, 1, id
	default:
		return fuse.ENOENT
	}
	return fuse.OK
}

// Files named by rttName(i) have node id firstNamedID+i.
const firstNamedID = 16

func rttName(i int) string { return "rtt-" + strconv.Itoa(i) }

func (rttFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	id := uint64(rttFileID)
	if h.NodeId != fuse.FUSE_ROOT_ID {
		return fuse.ENOENT
	}
	if name != rttFile {
		i, err := strconv.Atoi(strings.TrimPrefix(name, "rtt-"))
		if !strings.HasPrefix(name, "rtt-") || err != nil || i < 0 {
			return fuse.ENOENT
		}
		id = firstNamedID + uint64(i)
	}
	out.NodeId = id
	out.SetEntryTimeout(time.Hour) // as cachefs's cached mode: no GETATTR follows
	out.SetAttrTimeout(time.Hour)
	return attr(id, &out.Attr)
}

func (rttFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.NodeId != rttFileID {
		return fuse.EISDIR
	}
	return fuse.OK
}

var zeros [rttFileSize]byte

func (rttFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if in.Offset >= rttFileSize {
		return fuse.ReadResultData(nil), fuse.OK
	}
	return fuse.ReadResultData(zeros[in.Offset:min(rttFileSize, in.Offset+uint64(in.Size))]), fuse.OK
}

func (rttFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	return 0, fuse.ENOATTR
}

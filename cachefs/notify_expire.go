package cachefs

import (
	"encoding/binary"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Names are invalidated with FUSE_EXPIRE_ONLY where the kernel has it:
// the entry's timeout expires, so its next use asks again, but it stays
// in the dcache. go-fuse's EntryNotify drops it (d_invalidate), which
// also detaches whatever is mounted on it: the binds that give
// registered subtrees their mode (guest.go) would go with any
// invalidation of their directory's name, a reconnect's among them.
// go-fuse has no call for the flag, so the notification is written to
// the connection's /dev/fuse descriptor directly (one write is one
// message, whatever else writes to it).

// expirer writes FUSE_NOTIFY_INVAL_ENTRY with FUSE_EXPIRE_ONLY.
type expirer struct {
	mu sync.Mutex // protects fd
	fd int        // a dup of the connection's /dev/fuse descriptor; -1: none
}

// setFD takes a dup of the connection's descriptor if the kernel offers
// the flag (ki: its INIT).
func (e *expirer) setFD(fd int, ki *fuse.InitIn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fd = -1
	if fd < 0 || ki.Flags64()&fuse.CAP_HAS_EXPIRE_ONLY == 0 {
		return
	}
	if d, err := unix.Dup(fd); err == nil {
		unix.CloseOnExec(d)
		e.fd = d
	}
}

func (e *expirer) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fd >= 0 {
		unix.Close(e.fd)
		e.fd = -1
	}
}

// notifyInvalEntry is FUSE_NOTIFY_INVAL_ENTRY's code in an out header.
const notifyInvalEntry = 3

// expire expires name in directory parent; false if it could not (no
// descriptor, or the kernel refused), and EntryNotify must do.
func (e *expirer) expire(parent uint64, name string) bool {
	const hdr, body = 16, 16
	msg := make([]byte, hdr+body+len(name)+1)
	le := binary.LittleEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint32(msg[4:], notifyInvalEntry)
	le.PutUint64(msg[16:], parent)
	le.PutUint32(msg[24:], uint32(len(name)))
	le.PutUint32(msg[28:], fuse.EXPIRE_ONLY)
	copy(msg[hdr+body:], name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fd < 0 {
		return false
	}
	_, err := unix.Write(e.fd, msg)
	// ENOENT: the kernel has no such entry, which is as good.
	return err == nil || err == unix.ENOENT
}

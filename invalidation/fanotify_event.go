//go:build linux

package invalidation

import (
	"bytes"
	"encoding/binary"
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Decoding of the records a FAN_REPORT_DFID_NAME group reads: each
// event is a fanotify_event_metadata followed by info records, each a
// header (type u8, pad u8, len u16) and, for the fid types, an fsid
// (2×i32), a struct file_handle (handle_bytes u32, handle_type i32,
// f_handle) and a NUL-terminated name, padded to len.

const sizeofFanMeta = int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))

// fsid is a filesystem's statfs f_fsid, as fanotify reports it.
type fsid [2]int32

// fanFID is a directory named by file handle, and an entry in it.
type fanFID struct {
	key    string // fsid, handle type and bytes: the resolution cache key
	fsid   fsid
	htype  int32
	handle []byte
	name   string // "." for an event on the directory itself
}

// fanEvent is one decoded fanotify event.
type fanEvent struct {
	mask uint64
	pid  int32
	fd   int32
	dir  fanFID // FAN_EVENT_INFO_TYPE_DFID_NAME
	old  fanFID // FAN_RENAME: OLD_DFID_NAME
	new  fanFID // FAN_RENAME: NEW_DFID_NAME
}

var errShortEvent = errors.New("fanotify: truncated event")

// nextFanEvent decodes the first event of b and returns the rest.
func nextFanEvent(b []byte) (fanEvent, []byte, error) {
	if len(b) < sizeofFanMeta {
		return fanEvent{}, nil, errShortEvent
	}
	n := int(binary.LittleEndian.Uint32(b))
	meta := int(binary.LittleEndian.Uint16(b[6:]))
	if n < sizeofFanMeta || n > len(b) || meta < sizeofFanMeta || meta > n {
		return fanEvent{}, nil, errShortEvent
	}
	ev := fanEvent{mask: binary.LittleEndian.Uint64(b[8:]), fd: int32(binary.LittleEndian.Uint32(b[16:])),
		pid: int32(binary.LittleEndian.Uint32(b[20:]))}
	err := ev.parseInfo(b[meta:n])
	return ev, b[n:], err
}

// parseInfo decodes the info records; unknown types are skipped.
func (ev *fanEvent) parseInfo(b []byte) error {
	for len(b) >= 4 {
		typ, n := b[0], int(binary.LittleEndian.Uint16(b[2:]))
		if n < 4 || n > len(b) {
			return errShortEvent
		}
		var dst *fanFID
		switch typ {
		case unix.FAN_EVENT_INFO_TYPE_DFID_NAME, unix.FAN_EVENT_INFO_TYPE_DFID:
			dst = &ev.dir
		case unix.FAN_EVENT_INFO_TYPE_OLD_DFID_NAME:
			dst = &ev.old
		case unix.FAN_EVENT_INFO_TYPE_NEW_DFID_NAME:
			dst = &ev.new
		}
		if dst != nil {
			fid, err := parseFID(b[4:n])
			if err != nil {
				return err
			}
			*dst = fid
		}
		b = b[n:]
	}
	return nil
}

// parseFID decodes an fsid, a file handle and an optional name.
func parseFID(b []byte) (fanFID, error) {
	if len(b) < 16 {
		return fanFID{}, errShortEvent
	}
	hlen := int(binary.LittleEndian.Uint32(b[8:]))
	if hlen > len(b)-16 {
		return fanFID{}, errShortEvent
	}
	f := fanFID{key: string(b[:16+hlen]), htype: int32(binary.LittleEndian.Uint32(b[12:]))}
	f.fsid = fsid{int32(binary.LittleEndian.Uint32(b)), int32(binary.LittleEndian.Uint32(b[4:]))}
	f.handle = []byte(f.key[16:])
	name := b[16+hlen:]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	f.name = string(name)
	return f, nil
}

// opsOf lists the ops of a (possibly merged) entry event in the order
// they most likely happened: the kernel merges queued events of one name
// into one mask and loses their order. A name both created and deleted
// was deleted first if it exists now.
func opsOf(mask uint64, exists func() bool) []Op {
	create, del := mask&unix.FAN_CREATE != 0, mask&unix.FAN_DELETE != 0
	recreated := create && del && exists()
	var ops []Op
	if recreated {
		ops = append(ops, Delete)
	}
	if create {
		ops = append(ops, Create)
	}
	if mask&(unix.FAN_MODIFY|unix.FAN_CLOSE_WRITE) != 0 {
		ops = append(ops, Modify)
	}
	if mask&unix.FAN_ATTRIB != 0 {
		ops = append(ops, Attrib)
	}
	if del && !recreated {
		ops = append(ops, Delete)
	}
	return ops
}

//go:build linux

package upstream

import (
	"bytes"
	"encoding/binary"

	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// Directories stream from getdents64: a readdir at an offset seeks the
// directory fd to the d_off the previous entry returned (reopening the
// fd if it was evicted), so no listing is held on the host.

// maxReaddir bounds the entries of one reply.
const maxReaddir = 4096

func (ss *session) opendir(req *NodeReq, resp *OpenResp) error {
	return ss.withNode(req.Node, func(n *node, fd int) error {
		if n.fmt != unix.S_IFDIR {
			return unix.ENOTDIR
		}
		dfd, err := hostfs.Reopen(fd, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		resp.Handle = ss.newFile(n, dfd, unix.O_RDONLY|unix.O_DIRECTORY, true)
		return nil
	})
}

func (ss *session) readdir(req *ReaddirReq, resp *ReaddirResp) error {
	f, err := ss.handle(req.Handle)
	if err != nil {
		return err
	}
	if !f.dir {
		return unix.ENOTDIR
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := ss.fileFD(f)
	if err != nil {
		return err
	}
	defer r.release()
	if f.atPos != r || f.pos != req.Offset {
		if _, err := unix.Seek(r.fd, int64(req.Offset), 0); err != nil {
			return err
		}
	}
	limit := int(min(max(req.Max, 1), maxReaddir))
	ents, pos, eof, err := readDirents(r.fd, req.Offset, limit)
	if err != nil {
		return err
	}
	ss.trackPos(f, r, pos)
	if req.Plus {
		ents = ss.plus(f.node, r.fd, ents)
	}
	resp.Entries, resp.EOF = ents, eof
	return nil
}

// trackPos remembers where fd r stands, keeping r referenced so that a
// recycled fd number can never be mistaken for it. Needs f.mu.
func (ss *session) trackPos(f *openFile, r *fdRef, pos uint64) {
	if f.atPos != r {
		if f.atPos != nil {
			f.atPos.release()
		}
		r.refs.Add(1)
		f.atPos = r
	}
	f.pos = pos
}

// readDirents reads up to limit entries from fd, which stands at off. It
// returns them, the offset after the last one, and whether the
// directory ended. Entries read past limit are given back by seeking.
// Park names (Parked) are left out.
func readDirents(fd int, off uint64, limit int) ([]Dirent, uint64, bool, error) {
	var ents []Dirent
	buf := make([]byte, 32<<10)
	for len(ents) < limit {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, off, false, err
		}
		if n == 0 {
			return ents, off, true, nil
		}
		for b := buf[:n]; len(b) >= 19 && len(ents) < limit; {
			reclen := int(binary.LittleEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				return nil, off, false, unix.EIO
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off = binary.LittleEndian.Uint64(b[8:])
			if !Parked(string(name)) {
				ents = append(ents, Dirent{Name: string(name), Off: off,
					Ino: binary.LittleEndian.Uint64(b), Mode: uint32(b[18]) << 12})
			}
			b = b[reclen:]
		}
	}
	if _, err := unix.Seek(fd, int64(off), 0); err != nil {
		return nil, off, false, err
	}
	return ents, off, false, nil
}

// plus fills each entry's attributes and node, taking a guest reference
// per entry as a lookup would. Entries that vanished meanwhile are
// dropped.
func (ss *session) plus(dir *node, dfd int, ents []Dirent) []Dirent {
	out := ents[:0]
	for _, e := range ents {
		if e.Name != "." && e.Name != ".." {
			var err error
			if e.Entry, err = ss.lookupIn(dir, dfd, e.Name); err != nil {
				continue
			}
			e.Mode = e.Entry.Attr.Mode
		}
		out = append(out, e)
	}
	return out
}

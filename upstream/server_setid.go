//go:build linux

package upstream

import (
	"strconv"

	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// Set-id bits. Unless ServerOptions.AllowSetID is set, the set-user-id
// and set-group-id bits a guest gives a regular file never reach the
// host file: they are kept in its setidXattr and added to its mode in
// the attributes the guest gets, so the guest sees the modes it set
// while no host program runs set-id from a file a guest made. Set-id
// bits the host gave a file itself are reported as they are. Other file
// types keep their bits on the host: a directory's set-group-id bit only
// hands its group to new names.

// setidXattr holds the set-id bits a guest gave a regular file, in octal
// ("4000", "2000" or "6000"); absent, none. Like ownerXattr it is the
// server's own, hidden from the guest (privateXattr).
const setidXattr = "user.cachefs.setid"

const setidBits = unix.S_ISUID | unix.S_ISGID

// keepsSetid reports whether the set-id bits of a file of type fmt (S_IF
// bits) go to setidXattr rather than to the host file.
func (s *Server) keepsSetid(fmt uint32) bool {
	return !s.opts.AllowSetID && fmt == unix.S_IFREG
}

// splitMode splits a mode asked for a file of type fmt into the part the
// host file gets and the part setidXattr keeps.
func (s *Server) splitMode(fmt, mode uint32) (host, kept uint32) {
	if !s.keepsSetid(fmt) {
		return mode, 0
	}
	return mode &^ setidBits, mode & setidBits
}

// readSetid returns the bits setidXattr keeps for the file at path, and
// whether the file has no setidXattr (absent); get is unix.Getxattr, or
// unix.Lgetxattr for a path whose last component must not be followed.
func readSetid(get func(path, attr string, dest []byte) (int, error), path string) (bits uint32, absent bool) {
	var buf [8]byte
	n, err := get(path, setidXattr, buf[:])
	if err != nil {
		return 0, err == unix.ENODATA
	}
	v, err := strconv.ParseUint(string(buf[:n]), 8, 32)
	if err != nil {
		return 0, false
	}
	return uint32(v) & setidBits, false
}

// writeSetid makes setidXattr of the file at path keep bits (none:
// removed).
func (s *Server) writeSetid(path string, bits uint32) error {
	s.setidCalls.Add(1)
	if bits == 0 {
		if err := unix.Removexattr(path, setidXattr); err != nil && err != unix.ENODATA {
			return err
		}
		return nil
	}
	return unix.Setxattr(path, setidXattr, []byte(strconv.FormatUint(uint64(bits), 8)), 0)
}

// chmod sets the mode of the file of type fmt behind fd (O_PATH or
// open), its set-id bits into setidXattr where the server keeps them.
// absent says that a read of setidXattr just found none (readSetid):
// no set-id bits to keep then need no system call.
func (s *Server) chmod(fd int, fmt, mode uint32, absent bool) error {
	host, kept := s.splitMode(fmt, mode&07777)
	if s.keepsSetid(fmt) && (kept != 0 || !absent) {
		if err := s.writeSetid(hostfs.FDPath(fd), kept); err != nil {
			return err
		}
	}
	return unix.Fchmodat(unix.AT_FDCWD, hostfs.FDPath(fd), host, 0)
}

// keepSetidAt makes setidXattr of the regular file just made as name in
// dfd keep bits.
func (s *Server) keepSetidAt(dfd int, name string, bits uint32) error {
	if bits == 0 {
		return nil
	}
	fd, err := hostfs.OpenNode(dfd, name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return unix.EEXIST // not what was made: replaced meanwhile
	}
	return s.writeSetid(hostfs.FDPath(fd), bits)
}

// keptMode returns the mode of the file behind fd (O_PATH or open) as
// the guest sees it, the host's with the kept set-id bits, and whether
// it has no setidXattr (for chmod).
func (s *Server) keptMode(fd int, st *unix.Stat_t) (uint32, bool) {
	if !s.keepsSetid(st.Mode & unix.S_IFMT) {
		return st.Mode, false
	}
	bits, absent := readSetid(unix.Getxattr, hostfs.FDPath(fd))
	return st.Mode | bits, absent
}

// killOnChown drops the set-id bits Linux drops when a regular file
// changes owner: set-user-id, and set-group-id where group execution
// makes it mean something. The host's chown does so for the host's
// bits; the server does it for the bits it keeps.
func killOnChown(mode uint32) uint32 {
	mode &^= unix.S_ISUID
	if mode&unix.S_IXGRP != 0 {
		mode &^= unix.S_ISGID
	}
	return mode
}

// chownedMode returns the mode a file of type fmt is left with after a
// change of owner, as far as the bits the server keeps go: the host's
// chown has dropped the host file's own.
func (s *Server) chownedMode(fmt, mode uint32) uint32 {
	if !s.keepsSetid(fmt) {
		return mode
	}
	return killOnChown(mode)
}

// killSetidOnWrite drops the set-id bits of the file behind fd that a
// write by an unprivileged guest process of group writer drops
// (WriteKillSuidgid); the server may be privileged and keep them
// otherwise.
func (ss *session) killSetidOnWrite(fd int, writer uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	inGroup := func() bool {
		gid := st.Gid
		if ss.srv.ownerXattr {
			_, gid = ss.readOwner(fd, st.Uid, st.Gid)
		}
		return gid == writer
	}
	if host := st.Mode & 07777; host&setidBits != 0 {
		if mode := killOnWrite(host, inGroup); mode != host {
			if err := unix.Fchmod(fd, mode); err != nil {
				return err
			}
		}
	}
	if !ss.srv.keepsSetid(st.Mode & unix.S_IFMT) {
		return nil
	}
	bits, _ := readSetid(unix.Getxattr, hostfs.FDPath(fd))
	if bits == 0 {
		return nil
	}
	if left := killOnWrite(bits|st.Mode&unix.S_IXGRP, inGroup) & setidBits; left != bits {
		return ss.srv.writeSetid(hostfs.FDPath(fd), left)
	}
	return nil
}

// killOnWrite returns mode less the set-id bits a write by a process
// without CAP_FSETID drops: set-user-ID, and set-group-ID where group
// execution is set or the writer is not in the file's group (inGroup,
// asked only then).
func killOnWrite(mode uint32, inGroup func() bool) uint32 {
	mode &^= unix.S_ISUID
	if mode&unix.S_ISGID != 0 && (mode&unix.S_IXGRP != 0 || !inGroup()) {
		mode &^= unix.S_ISGID
	}
	return mode
}

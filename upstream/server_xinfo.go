//go:build linux

package upstream

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// Extended-attribute summaries. Every attribute reply for a regular file
// or directory says whether the file has extended attributes the guest
// may see (AttrNoXattrs when it has none), so that a cached subtree
// answers the getxattr calls `ls -l` and others make of every file
// (security.selinux, system.posix_acl_access) without a round trip. One
// llistxattr per file finds both that and the server's own set-id xattr,
// which a listing needed a call per file for already.

// xattrSummary lists the xattrs of the file at path (following path's
// last component if follow: a /proc fd link) and returns the set-id bits
// kept for it (if keep) and whether the guest would see no xattrs.
func xattrSummary(path string, follow, keep bool) (setid uint32, none, dev bool) {
	get := unix.Lgetxattr
	if follow {
		get = unix.Getxattr
	}
	var buf [512]byte // on the stack: called for every entry listed
	var n int
	var err error
	if follow {
		n, err = unix.Listxattr(path, buf[:])
	} else {
		n, err = unix.Llistxattr(path, buf[:])
	}
	switch {
	case err == unix.ERANGE: // too many to list here: visible ones likely
		if keep {
			setid, _ = readSetid(get, path)
		}
		return setid, false, false
	case err != nil: // no xattr support, or gone: as without
		return 0, false, false
	}
	none = true
	for rest := buf[:n]; len(rest) > 0; {
		name := rest
		if i := bytes.IndexByte(rest, 0); i >= 0 {
			name, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		switch {
		case len(name) == 0:
		case string(name) == setidXattr:
			if keep {
				setid, _ = readSetid(get, path)
			}
		case string(name) == devXattr:
			dev = true
		case !hiddenXattr(string(name)):
			none = false
		}
	}
	return setid, none, dev
}

// summarize completes a's set-id bits and AttrNoXattrs flag for the
// file at path (see xattrSummary for follow).
func (s *Server) summarize(a *Attr, path string, follow bool) {
	fmt := a.Mode & unix.S_IFMT
	if fmt != unix.S_IFREG && fmt != unix.S_IFDIR {
		return
	}
	setid, none, dev := xattrSummary(path, follow, s.keepsSetid(fmt))
	a.Mode |= setid
	if none {
		a.Flags |= AttrNoXattrs
	}
	if dev && fmt == unix.S_IFREG {
		get := unix.Lgetxattr
		if follow {
			get = unix.Getxattr
		}
		showDevice(a, get, path)
	}
}

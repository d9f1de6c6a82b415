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
func xattrSummary(path string, follow, keep bool) (setid uint32, none bool) {
	list, get := unix.Llistxattr, unix.Lgetxattr
	if follow {
		list, get = unix.Listxattr, unix.Getxattr
	}
	var buf [512]byte
	n, err := list(path, buf[:])
	switch {
	case err == unix.ERANGE: // too many to list here: visible ones likely
		if keep {
			setid = readSetid(get, path)
		}
		return setid, false
	case err != nil: // no xattr support, or gone: as without
		return 0, false
	}
	none = true
	for _, name := range bytes.Split(buf[:n], []byte{0}) {
		switch {
		case len(name) == 0:
		case string(name) == setidXattr:
			if keep {
				setid = readSetid(get, path)
			}
		case !hiddenXattr(string(name)):
			none = false
		}
	}
	return setid, none
}

// summarize completes a's set-id bits and AttrNoXattrs flag for the
// file at path (see xattrSummary for follow).
func (s *Server) summarize(a *Attr, path string, follow bool) {
	fmt := a.Mode & unix.S_IFMT
	if fmt != unix.S_IFREG && fmt != unix.S_IFDIR {
		return
	}
	setid, none := xattrSummary(path, follow, s.keepsSetid(fmt))
	a.Mode |= setid
	if none {
		a.Flags |= AttrNoXattrs
	}
}

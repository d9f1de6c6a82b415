//go:build linux

package upstream

import (
	"bytes"
	"strings"

	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// Extended attributes go through /proc/self/fd paths, since the xattr
// calls do not take O_PATH fds. Symlinks have no user xattrs on Linux;
// their list is empty. Names the guest may not reach are missing to it:
// left out of lists, ENODATA to get, refused to set or remove.

// privateXattr reports the server's own xattrs: the owner and set-id
// bits it keeps for the guest (user.cachefs.*).
func privateXattr(name string) bool {
	return strings.HasPrefix(name, "user.cachefs.")
}

// guardedXattr reports the namespaces the host's kernel acts on:
// security.* (file capabilities, LSM labels) and trusted.* (overlayfs,
// privileged tools). A privileged server could set them, and so a guest
// could give a host program capabilities.
func guardedXattr(name string) bool {
	return strings.HasPrefix(name, "security.") || strings.HasPrefix(name, "trusted.")
}

func hiddenXattr(name string) bool { return privateXattr(name) || guardedXattr(name) }

func (ss *session) getxattr(req *XattrReq, resp *XattrResp) error {
	if hiddenXattr(req.Name) {
		return unix.ENODATA
	}
	return ss.withNode(req.Node, func(n *node, fd int) error {
		if n.fmt == unix.S_IFLNK {
			return unix.ENODATA
		}
		return sizedCall(req.Size, resp, func(b []byte) (int, error) {
			return hostfs.Getxattr(fd, req.Name, b)
		})
	})
}

func (ss *session) listxattr(req *XattrReq, resp *XattrResp) error {
	return ss.withNode(req.Node, func(n *node, fd int) error {
		if n.fmt == unix.S_IFLNK {
			return nil
		}
		err := sizedCall(max(req.Size, 64<<10), resp, func(b []byte) (int, error) {
			return hostfs.Listxattr(fd, b)
		})
		if err != nil {
			return err
		}
		resp.Data = filterXattrs(resp.Data)
		resp.Size = uint32(len(resp.Data))
		if req.Size == 0 {
			resp.Data = nil
		} else if resp.Size > req.Size {
			return unix.ERANGE
		}
		return nil
	})
}

// filterXattrs leaves the hidden names out of a NUL-separated list.
func filterXattrs(list []byte) []byte {
	var out []byte
	for _, name := range bytes.Split(list, []byte{0}) {
		if len(name) > 0 && !hiddenXattr(string(name)) {
			out = append(append(out, name...), 0)
		}
	}
	return out
}

// sizedCall runs an xattr call with a buffer of size (0: ask the size).
func sizedCall(size uint32, resp *XattrResp, f func([]byte) (int, error)) error {
	if size > MaxIO {
		size = MaxIO
	}
	var buf []byte
	if size > 0 {
		buf = make([]byte, size)
	}
	n, err := f(buf)
	if err != nil {
		return err
	}
	resp.Size = uint32(n)
	if size > 0 {
		resp.Data = buf[:n]
	}
	return nil
}

func (ss *session) setxattr(req *SetxattrReq, _ *Empty) error {
	if err := ss.writable(); err != nil {
		return err
	}
	if hiddenXattr(req.Name) {
		return unix.EPERM
	}
	return ss.withNode(req.Node, func(n *node, fd int) error {
		if n.fmt == unix.S_IFLNK {
			return unix.EPERM
		}
		return hostfs.Setxattr(fd, req.Name, req.Data, int(req.Flags))
	})
}

func (ss *session) removexattr(req *XattrReq, _ *Empty) error {
	if err := ss.writable(); err != nil {
		return err
	}
	if guardedXattr(req.Name) {
		return unix.EPERM
	}
	if privateXattr(req.Name) {
		return unix.ENODATA
	}
	return ss.withNode(req.Node, func(n *node, fd int) error {
		if n.fmt == unix.S_IFLNK {
			return unix.ENODATA
		}
		return hostfs.Removexattr(fd, req.Name)
	})
}

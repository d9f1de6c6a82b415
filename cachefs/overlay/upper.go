package overlay

import (
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// Reading the upper directory: what overlayfs left at a path, with the
// xattrs it marks its work by (trusted.overlay.*), which are read here
// and never written back.

// kind is what an upper entry is.
type kind uint8

const (
	kUnknown  kind = iota // a placeholder: nothing known on the host
	kFile                 // regular file
	kDir                  // directory
	kSymlink              // symbolic link
	kWhiteout             // char device 0/0: the lower's name is deleted
	kSpecial              // fifo or socket
	kDevice               // device node: written back as the host's placeholder of it (upstream's server_dev.go)
)

const (
	xattrRedirect = "trusted.overlay.redirect"
	xattrOpaque   = "trusted.overlay.opaque"
	xattrMetacopy = "trusted.overlay.metacopy"
	xattrOrigin   = "trusted.overlay.origin"
)

// entry is one upper entry as a scan saw it. The fields after ctime are
// read by details, only for entries that changed.
type entry struct {
	path                string // relative to the upper root, "" for the root
	kind                kind
	ino                 uint64
	nlink               uint64
	mode                uint32 // st_mode
	uid, gid            uint32
	size                int64
	rdev                uint32 // a device's number
	btime               int64  // birth time (ns), 0 if unknown: with ino, which inode
	atime, mtime, ctime int64  // nanoseconds

	redirect string           // trusted.overlay.redirect: moved here from this lower path
	opaque   bool             // hides the lower directory of the same path
	metacopy bool             // metadata only: the data is still the lower file's
	origin   bool             // copied up from a lower file (trusted.overlay.origin)
	xattrs   []upstream.Xattr // the ones written back, as listed
	target   string           // a symlink's
}

// statEntry stats name in dfd ("": dfd itself) as the entry rel, with
// its birth time where the file system keeps one.
func statEntry(dfd int, name, rel string) (*entry, error) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var st unix.Statx_t
	if err := unix.Statx(dfd, name, flags, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &st); err != nil {
		return nil, err
	}
	ns := func(t unix.StatxTimestamp) int64 { return t.Sec*1e9 + int64(t.Nsec) }
	e := &entry{path: rel, ino: st.Ino, nlink: uint64(st.Nlink), mode: uint32(st.Mode), uid: st.Uid, gid: st.Gid,
		size: int64(st.Size), atime: ns(st.Atime), mtime: ns(st.Mtime), ctime: ns(st.Ctime),
		rdev: uint32(unix.Mkdev(st.Rdev_major, st.Rdev_minor))}
	if st.Mask&unix.STATX_BTIME != 0 {
		e.btime = ns(st.Btime)
	}
	e.kind = kindOf(e.mode, uint64(e.rdev))
	return e, nil
}

func kindOf(mode uint32, rdev uint64) kind {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return kFile
	case unix.S_IFDIR:
		return kDir
	case unix.S_IFLNK:
		return kSymlink
	case unix.S_IFCHR:
		if rdev == 0 {
			return kWhiteout
		}
		return kDevice
	case unix.S_IFIFO, unix.S_IFSOCK:
		return kSpecial
	}
	return kDevice
}

// details reads what a changed entry needs beyond its stat: overlayfs's
// marks, the xattrs to write back and a symlink's target. name is in
// directory dfd ("": dfd itself).
func (e *entry) details(dfd int, name string) error {
	if e.kind == kWhiteout || e.kind == kDevice {
		return nil
	}
	if e.kind == kSymlink {
		t, err := readlinkAt(dfd, name)
		e.target = t
		return err
	}
	full := fdPath(dfd, name)
	names, err := listXattrAt(dfd, name, full)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := e.addXattr(full, n); err != nil {
			return err
		}
	}
	return nil
}

// addXattr reads xattr n into e: overlayfs's marks into their fields,
// the others into xattrs unless the host would refuse them.
func (e *entry) addXattr(full, n string) error {
	v, err := getXattr(full, n)
	if err == unix.ENODATA {
		return nil // removed since listed
	}
	if err != nil {
		return err
	}
	switch n {
	case xattrRedirect:
		e.redirect = string(v)
	case xattrOpaque:
		e.opaque = string(v) == "y"
	case xattrMetacopy:
		e.metacopy = true
	case xattrOrigin:
		e.origin = true
	default:
		if writtenBack(n) {
			e.xattrs = append(e.xattrs, upstream.Xattr{Name: n, Value: v})
		}
	}
	return nil
}

// writtenBack reports the xattr names the host takes: not the
// namespaces its kernel acts on (trusted.*, security.*), nor the
// server's own (user.cachefs.*).
func writtenBack(name string) bool {
	for _, p := range []string{"trusted.", "security.", "user.cachefs."} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return true
}

func readlinkAt(dfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// noListxattrat is set once listxattrat(2) (Linux 6.13) is found
// missing.
var noListxattrat atomic.Bool

// listXattrAt lists the xattrs of name in dfd, not following a symlink:
// by listxattrat(2), which looks up name alone, else by full, its
// /proc/self/fd path, whose walk through /proc costs a scan about as
// much as its statx.
func listXattrAt(dfd int, name, full string) ([]string, error) {
	if noListxattrat.Load() {
		return listXattr(full)
	}
	return listXattrWith(func(buf []byte) (int, error) {
		n, err := listxattrat(dfd, name, buf)
		if err == unix.ENOSYS {
			noListxattrat.Store(true)
			return unix.Llistxattr(full, buf)
		}
		return n, err
	})
}

func listxattrat(dfd int, name string, buf []byte) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	var b unsafe.Pointer
	if len(buf) > 0 {
		b = unsafe.Pointer(&buf[0])
	}
	n, _, e := unix.Syscall6(unix.SYS_LISTXATTRAT, uintptr(dfd), uintptr(unsafe.Pointer(p)), unix.AT_SYMLINK_NOFOLLOW,
		uintptr(b), uintptr(len(buf)), 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func listXattr(full string) ([]string, error) {
	return listXattrWith(func(buf []byte) (int, error) { return unix.Llistxattr(full, buf) })
}

// listXattrWith lists xattr names by list, a listxattr call.
func listXattrWith(list func(buf []byte) (int, error)) ([]string, error) {
	buf := make([]byte, 512)
	for {
		n, err := list(buf)
		if err == unix.ERANGE {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, s := range strings.Split(string(buf[:n]), "\x00") {
			if s != "" {
				names = append(names, s)
			}
		}
		return names, nil
	}
}

func getXattr(full, name string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(full, name, buf)
		if err == unix.ERANGE {
			buf = make([]byte, 2*len(buf)+65536)
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

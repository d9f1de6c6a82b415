package hostfs

import "golang.org/x/sys/unix"

// handles identifies nodes by file handle, on the export root's mount.
type handles struct {
	mount int // immutable: the export root's mount id
}

// newHandles checks that handles work for the export and this process
// (open_by_handle_at needs CAP_DAC_READ_SEARCH).
func newHandles(rootFD int) (Identity, error) {
	h, mnt, err := unix.NameToHandleAt(rootFD, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return nil, err
	}
	fd, err := unix.OpenByHandleAt(rootFD, h, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	return handles{mount: mnt}, nil
}

func (handles) Kind() Kind { return Handles }

// Key is nil for an inode on another mount than the export root's, the
// only mount open_by_handle_at is given.
func (h handles) Key(dirfd int, name string) *Handle {
	fh, mnt, err := unix.NameToHandleAt(dirfd, name, 0)
	if err != nil || mnt != h.mount {
		return nil
	}
	return &Handle{Type: fh.Type(), Bytes: fh.Bytes()}
}

func (handles) Open(mountFD int, h *Handle) (int, error) {
	return unix.OpenByHandleAt(mountFD, unix.NewFileHandle(h.Type, h.Bytes), unix.O_PATH|unix.O_CLOEXEC)
}

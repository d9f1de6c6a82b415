package cachefs

import (
	"os"

	"golang.org/x/sys/unix"
)

// Staging files are opened, read and written per kernel request, so
// they are opened without the os package's poller registration: for
// every regular file os.OpenFile sets O_NONBLOCK, tries epoll_ctl (which
// refuses regular files) and clears O_NONBLOCK again, five system calls
// beyond the openat (strace of an untar: 4 fcntl and 1 epoll_ctl per
// open). os.NewFile on a blocking descriptor asks one fcntl and does
// not register it.

// openPlain opens a regular file for blocking I/O.
func openPlain(path string, flags int, perm uint32) (*os.File, error) {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// writePlain creates or truncates the file at path and writes data.
func writePlain(path string, data []byte, perm uint32) error {
	f, err := openPlain(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

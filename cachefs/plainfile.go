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

// readPlain returns the contents of the file at path. The buffer is
// the size fstat gives; only a file that grew meanwhile makes it grow,
// and the end is found with a read into a small buffer, not by growing
// the whole one (a doubling per file read was 6% of the daemon's CPU in
// an untar, and as much again in garbage collection).
func readPlain(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	data := make([]byte, 0, st.Size)
	var probe [512]byte
	for {
		buf := data[len(data):cap(data)]
		if len(buf) == 0 {
			buf = probe[:]
		}
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return data, nil
		}
		if len(buf) == len(probe) && &buf[0] == &probe[0] {
			data = append(data, probe[:n]...) // grown meanwhile
			continue
		}
		data = data[:len(data)+n]
	}
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

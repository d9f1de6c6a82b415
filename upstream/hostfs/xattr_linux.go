package hostfs

import "golang.org/x/sys/unix"

// The xattr calls of the inode behind a node fd: the f* calls do not
// take O_PATH fds, so they go through the fd's /proc/self/fd link.

func Getxattr(fd int, name string, buf []byte) (int, error) {
	return unix.Getxattr(FDPath(fd), name, buf)
}

func Listxattr(fd int, buf []byte) (int, error) {
	return unix.Listxattr(FDPath(fd), buf)
}

func Setxattr(fd int, name string, data []byte, flags int) error {
	return unix.Setxattr(FDPath(fd), name, data, flags)
}

func Removexattr(fd int, name string) error {
	return unix.Removexattr(FDPath(fd), name)
}

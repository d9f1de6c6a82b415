package hostfs

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenNode opens name, a single component beneath dirfd, as an O_PATH
// fd, not following it if it is a symlink.
func OpenNode(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// Reopen opens the inode behind fd (an O_PATH fd or any other) with
// flags, through its /proc/self/fd link: the inode it names, wherever
// the host moved it, and even with no name left.
func Reopen(fd, flags int) (int, error) {
	return unix.Open(FDPath(fd), flags|unix.O_CLOEXEC, 0)
}

// FDPath names an fd so that path-only syscalls reach its inode.
func FDPath(fd int) string {
	return "/proc/self/fd/" + strconv.Itoa(fd)
}

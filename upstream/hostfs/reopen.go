package hostfs

import "golang.org/x/sys/unix"

// ReopenAt opens name in dirfd with flags, not following a symlink, and
// checks that it is still the inode (dev, ino): the portable way to
// reopen a node, through its parent directory, which macOS needs (it
// has no /proc/self/fd to reopen an fd by). ESTALE when name holds
// another inode now, or none. O_TRUNC is applied only once the inode is
// checked, so a name the host replaced is never truncated.
func ReopenAt(dirfd int, name string, flags int, dev, ino uint64) (int, error) {
	fd, err := unix.Openat(dirfd, name, flags&^(unix.O_TRUNC|unix.O_CREAT|unix.O_EXCL)|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT || err == unix.ELOOP {
		return -1, unix.ESTALE
	}
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint64(st.Dev) != dev || st.Ino != ino {
		unix.Close(fd)
		return -1, unix.ESTALE
	}
	if flags&unix.O_TRUNC != 0 {
		if err := unix.Ftruncate(fd, 0); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

package hostfs

import "golang.org/x/sys/unix"

// fsCasefoldFL is FS_CASEFOLD_FL: a directory whose names fold case
// (ext4, f2fs, tmpfs with casefold).
const fsCasefoldFL = 0x40000000

// CaseFold reports whether the directory dirfd (not O_PATH) folds case.
func CaseFold(dirfd int) bool {
	flags, err := unix.IoctlGetInt(dirfd, unix.FS_IOC_GETFLAGS)
	return err == nil && flags&fsCasefoldFL != 0
}

package hostfs

import "syscall"

// Errno values cross the wire as Linux's, the guest's. Linux hosts send
// theirs as they are; macOS's differ from 35 on (and EDEADLK is 11
// there, Linux's EAGAIN), so a macOS host maps them with darwinToLinux.
// Values with no Linux counterpart become EIO, or the nearest meaning.

// darwinToLinux maps macOS errno values (sys/errno.h) to Linux's.
var darwinToLinux = map[syscall.Errno]syscall.Errno{
	11: 35, // EDEADLK
	35: 11, // EAGAIN
	36: 115, 37: 114, 38: 88, 39: 89, 40: 90, 41: 91, 42: 92, 43: 93, 44: 94,
	45: 95, // ENOTSUP: EOPNOTSUPP
	46: 96, 47: 97, 48: 98, 49: 99, 50: 100, 51: 101, 52: 102, 53: 103, 54: 104,
	55: 105, 56: 106, 57: 107, 58: 108, 59: 109, 60: 110, 61: 111,
	62: 40, // ELOOP, also O_NOFOLLOW on a symlink
	63: 36, // ENAMETOOLONG
	64: 112, 65: 113,
	66: 39, // ENOTEMPTY
	67: 11, // EPROCLIM: EAGAIN
	68: 87, 69: 122,
	70: 116, // ESTALE
	71: 66,
	77: 37,         // ENOLCK
	78: 38,         // ENOSYS
	79: 22,         // EFTYPE: EINVAL
	80: 13, 81: 13, // EAUTH, ENEEDAUTH: EACCES
	84: 75,                     // EOVERFLOW
	85: 8, 86: 8, 87: 8, 88: 8, // bad executables: ENOEXEC
	89: 125, 90: 43, 91: 42, 92: 84,
	93: 61, // ENOATTR: ENODATA
	94: 74, 95: 72, 96: 61, 97: 67, 98: 63, 99: 60, 100: 71, 101: 62,
	102: 95, // EOPNOTSUPP
	104: 131, 105: 130,
	106: 11, // EQFULL: EAGAIN
}

// mapErrno returns e as Linux numbers it, by table: values up to 34 are
// Linux's already, others not in table are EIO.
func mapErrno(table map[syscall.Errno]syscall.Errno, e syscall.Errno) syscall.Errno {
	if l, ok := table[e]; ok {
		return l
	}
	if e <= 34 {
		return e
	}
	return syscall.EIO
}

package upstream

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// Device nodes. A guest's mknod of a character or block device makes a
// plain empty regular file on the host, whose type and device number
// devXattr keeps (as setidXattr keeps set-id bits): every attribute
// reply shows the guest a device node with its rdev (summarize), while
// the host holds no device a host program could open through the
// export. The guest's mounts are nodev, so no device is opened through
// them either.

// devXattr holds the device a placeholder file stands for: "c" or "b",
// a space and the device number in decimal (the kernel's encoding, as in
// Attr.Rdev). Like setidXattr it is the server's own, hidden from the
// guest (privateXattr).
const devXattr = "user.cachefs.dev"

// isDevice reports whether fmt (S_IF bits) is a device type.
func isDevice(fmt uint32) bool { return fmt == unix.S_IFCHR || fmt == unix.S_IFBLK }

// mkdevAt makes name in dfd the placeholder of a device of type fmt and
// number rdev, with permissions perm.
func mkdevAt(dfd int, name string, fmt, perm, rdev uint32) error {
	fd, err := unix.Openat(dfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	kind := "c "
	if fmt == unix.S_IFBLK {
		kind = "b "
	}
	err = unix.Fsetxattr(fd, devXattr, []byte(kind+strconv.FormatUint(uint64(rdev), 10)), 0)
	if err == nil {
		err = unix.Fchmod(fd, perm)
	}
	if err != nil {
		unix.Unlinkat(dfd, name, 0)
	}
	return err
}

// readDev returns the device type (S_IF bits) and number the file at
// path stands for, if it is a placeholder (get: see readSetid).
func readDev(get func(path, attr string, dest []byte) (int, error), path string) (fmt, rdev uint32, ok bool) {
	var buf [24]byte
	n, err := get(path, devXattr, buf[:])
	if err != nil || n < 3 || buf[1] != ' ' {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(string(buf[2:n]), 10, 32)
	if err != nil {
		return 0, 0, false
	}
	switch buf[0] {
	case 'c':
		return unix.S_IFCHR, uint32(v), true
	case 'b':
		return unix.S_IFBLK, uint32(v), true
	}
	return 0, 0, false
}

// showDevice makes a, the attributes of a regular file that has a
// devXattr, those of the device it stands for.
func showDevice(a *Attr, get func(path, attr string, dest []byte) (int, error), path string) {
	if fmt, rdev, ok := readDev(get, path); ok {
		a.Mode = fmt | a.Mode&07777
		a.Rdev, a.Size, a.Blocks = rdev, 0, 0
	}
}

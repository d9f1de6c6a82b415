package overlay

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Upper paths are reached from the upper root one component at a time,
// through directory fds, so that trees deeper than PATH_MAX work and no
// symlink is followed.

// openDir opens directory rel beneath root.
func openDir(root, rel string) (int, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil || rel == "" {
		return fd, err
	}
	for _, c := range strings.Split(rel, "/") {
		next, err := openChild(fd, c)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// openChild opens directory name in dfd.
func openChild(dfd int, name string) (int, error) {
	return unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// openParent opens the directory holding rel's last component and
// returns it with that name.
func openParent(root, rel string) (int, string, error) {
	dir, name := splitPath(rel)
	fd, err := openDir(root, dir)
	return fd, name, err
}

// fdPath names name in directory dfd by a short path, for the calls
// that take no fd (the xattr ones, inotify).
func fdPath(dfd int, name string) string {
	p := "/proc/self/fd/" + strconv.Itoa(dfd)
	if name != "" {
		p += "/" + name
	}
	return p
}

// readNames lists directory fd.
func readNames(fd int) ([]string, error) {
	d, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return names, unwrap(err)
}

// lstatAt stats rel beneath root.
func lstatAt(root, rel string, st *unix.Stat_t) error {
	dfd, name, err := openParent(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if name == "" {
		return unix.Fstat(dfd, st)
	}
	return unix.Fstatat(dfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}

// upperEntry stats rel beneath root as an entry.
func upperEntry(root, rel string) (*entry, error) {
	dfd, name, err := openParent(root, rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	return statEntry(dfd, name, rel)
}

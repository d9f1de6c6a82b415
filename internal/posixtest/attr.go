package posixtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Attributes: permissions, ownership, times, and creation modes.

// Chmod sets every permission bit pattern on files and directories,
// by path and by descriptor, and reads it back unchanged.
func Chmod(t *testing.T, dir string) {
	p, d := filepath.Join(dir, "f"), filepath.Join(dir, "d")
	writeFile(t, p, "x")
	check(t, os.Mkdir(d, 0755), "Mkdir")
	for _, m := range []uint32{0644, 0755, 0600, 0000, 0777, 04755, 02755, 01777, 07777, 0001} {
		for _, path := range []string{p, d} {
			check(t, unix.Chmod(path, m), fmt.Sprintf("Chmod %o", m))
			eq(t, fmt.Sprintf("mode after chmod %o", m), lstat(t, path).Mode&07777, m)
		}
	}
	f := open(t, p, os.O_RDONLY, 0)
	check(t, unix.Fchmod(int(f.Fd()), 0640), "Fchmod")
	eq(t, "mode after fchmod", fstat(t, f).Mode&07777, 0640)
	eq(t, "mode by path after fchmod", lstat(t, p).Mode&07777, 0640)
}

// ChmodZero creates a file with mode 0000: it stays 0000, and the
// descriptor that created it may still write.
func ChmodZero(t *testing.T, dir string) {
	withUmask(t, 022)
	p := filepath.Join(dir, "f")
	f := open(t, p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0)
	eq(t, "mode of new file", lstat(t, p).Mode&07777, 0)
	_, err := f.Write([]byte("written"))
	check(t, err, "Write through the creating fd")
	check(t, f.Close(), "Close")
	eq(t, "mode after write", lstat(t, p).Mode&07777, 0)
	if os.Geteuid() == 0 {
		wantContent(t, p, "written")
	}
	check(t, unix.Chmod(p, 0644), "Chmod")
	check(t, unix.Chmod(p, 0), "Chmod 0")
	eq(t, "mode after chmod 0", lstat(t, p).Mode&07777, 0)
}

// Chown changes owner and group by path, descriptor and of a symlink
// itself, and clears set-id bits of a regular file.
func Chown(t *testing.T, dir string) {
	requireRoot(t)
	p := filepath.Join(dir, "f")
	writeFile(t, p, "x")
	check(t, os.Chown(p, 1234, 5678), "Chown")
	st := lstat(t, p)
	eq(t, "uid", st.Uid, 1234)
	eq(t, "gid", st.Gid, 5678)
	check(t, os.Chown(p, -1, 42), "Chown group only")
	st = lstat(t, p)
	eq(t, "uid kept", st.Uid, 1234)
	eq(t, "gid", st.Gid, 42)
	f := open(t, p, os.O_RDONLY, 0)
	check(t, f.Chown(7, -1), "Fchown")
	eq(t, "uid after fchown", lstat(t, p).Uid, 7)
	eq(t, "gid kept after fchown", lstat(t, p).Gid, 42)

	l := filepath.Join(dir, "l")
	check(t, os.Symlink("f", l), "Symlink")
	check(t, os.Lchown(l, 99, 98), "Lchown")
	eq(t, "symlink uid", lstat(t, l).Uid, 99)
	eq(t, "symlink gid", lstat(t, l).Gid, 98)
	eq(t, "target uid kept", lstat(t, p).Uid, 7)

	check(t, unix.Chmod(p, 06755), "Chmod set-id")
	check(t, os.Chown(p, 1000, 1000), "Chown set-id file")
	eq(t, "mode after chown", lstat(t, p).Mode&07777, 0755)
}

// Utimens sets times with nanoseconds, leaves one alone with UTIME_OMIT
// and sets the time of a symlink itself.
func Utimens(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, "x")
	at := unix.Timespec{Sec: 1000000000, Nsec: 123456789}
	mt := unix.Timespec{Sec: 1100000000, Nsec: 987654321}
	check(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{at, mt}, 0), "utimensat")
	st := lstat(t, p)
	eq(t, "atime", st.Atim, at)
	eq(t, "mtime", st.Mtim, mt)

	mt2 := unix.Timespec{Sec: 1200000000, Nsec: 1}
	omit := unix.Timespec{Nsec: unix.UTIME_OMIT}
	check(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{omit, mt2}, 0), "utimensat atime omitted")
	st = lstat(t, p)
	eq(t, "atime kept", st.Atim, at)
	eq(t, "mtime", st.Mtim, mt2)
	at2 := unix.Timespec{Sec: 900000000, Nsec: 999999999}
	check(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{at2, omit}, 0), "utimensat mtime omitted")
	st = lstat(t, p)
	eq(t, "atime", st.Atim, at2)
	eq(t, "mtime kept", st.Mtim, mt2)

	now := unix.Timespec{Nsec: unix.UTIME_NOW}
	check(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{omit, now}, 0), "utimensat mtime now")
	st = lstat(t, p)
	if d := time.Since(time.Unix(st.Mtim.Unix())); d > time.Minute || d < -time.Minute {
		t.Fatalf("mtime after UTIME_NOW: %v from now", d)
	}
	eq(t, "atime kept", st.Atim, at2)

	l := filepath.Join(dir, "l")
	check(t, os.Symlink("f", l), "Symlink")
	check(t, unix.UtimesNanoAt(unix.AT_FDCWD, l, []unix.Timespec{at, mt}, unix.AT_SYMLINK_NOFOLLOW), "lutimes")
	eq(t, "symlink mtime", lstat(t, l).Mtim, mt)
	if lstat(t, p).Mtim == mt {
		t.Fatalf("lutimes changed the target")
	}
	d := filepath.Join(dir, "d")
	check(t, os.Mkdir(d, 0755), "Mkdir")
	check(t, unix.UtimesNanoAt(unix.AT_FDCWD, d, []unix.Timespec{at, mt}, 0), "utimensat dir")
	eq(t, "dir mtime", lstat(t, d).Mtim, mt)
}

// UtimesPreEpoch sets times before 1970 with a fraction of a second.
func UtimesPreEpoch(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, "x")
	at := unix.Timespec{Sec: -100, Nsec: 500000000}
	mt := unix.Timespec{Sec: -86400 * 365, Nsec: 1}
	check(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{at, mt}, 0), "utimensat")
	st := lstat(t, p)
	eq(t, "atime", st.Atim, at)
	eq(t, "mtime", st.Mtim, mt)
}

// Umask checks that the process umask applies to files, directories and
// fifos made with it, and that a umask of 0 masks nothing.
func Umask(t *testing.T, dir string) {
	for _, c := range []struct {
		mask          int
		file, dirMode uint32
	}{{022, 0644, 0755}, {0, 0666, 0777}, {077, 0600, 0700}, {0222, 0444, 0555}} {
		withUmask(t, c.mask)
		p := filepath.Join(dir, fmt.Sprintf("f%o", c.mask))
		fd, err := unix.Creat(p, 0666)
		check(t, err, "creat")
		unix.Close(fd)
		eq(t, fmt.Sprintf("file mode with umask %03o", c.mask), lstat(t, p).Mode&07777, c.file)
		d := filepath.Join(dir, fmt.Sprintf("d%o", c.mask))
		check(t, unix.Mkdir(d, 0777), "Mkdir")
		eq(t, fmt.Sprintf("dir mode with umask %03o", c.mask), lstat(t, d).Mode&07777, c.dirMode)
		q := filepath.Join(dir, fmt.Sprintf("p%o", c.mask))
		check(t, unix.Mkfifo(q, 0666), "Mkfifo")
		eq(t, fmt.Sprintf("fifo mode with umask %03o", c.mask), lstat(t, q).Mode&07777, c.file)
	}
}

// SetgidDir checks that files made in a set-group-id directory take its
// group, and directories also the set-group-id bit.
func SetgidDir(t *testing.T, dir string) {
	requireRoot(t)
	withUmask(t, 022)
	d := filepath.Join(dir, "d")
	check(t, os.Mkdir(d, 0755), "Mkdir")
	check(t, os.Chown(d, -1, 4242), "Chown")
	check(t, unix.Chmod(d, 02775), "Chmod")
	f := filepath.Join(d, "f")
	writeFile(t, f, "x")
	eq(t, "file gid", lstat(t, f).Gid, 4242)
	sub := filepath.Join(d, "sub")
	check(t, os.Mkdir(sub, 0755), "Mkdir sub")
	st := lstat(t, sub)
	eq(t, "subdir gid", st.Gid, 4242)
	eq(t, "subdir set-gid", st.Mode&unix.S_ISGID, unix.S_ISGID)
	check(t, unix.Mkfifo(filepath.Join(sub, "p"), 0644), "Mkfifo")
	eq(t, "fifo gid", lstat(t, filepath.Join(sub, "p")).Gid, 4242)
	plain := filepath.Join(dir, "plain")
	writeFile(t, plain, "x")
	eq(t, "gid outside", lstat(t, plain).Gid, uint32(os.Getegid()))
}

// Statfs checks that the numbers are sane.
func Statfs(t *testing.T, dir string) {
	writeFile(t, filepath.Join(dir, "f"), "x")
	for _, p := range []string{dir, filepath.Join(dir, "f")} {
		var st unix.Statfs_t
		check(t, unix.Statfs(p, &st), "Statfs")
		if st.Bsize <= 0 || st.Blocks == 0 || st.Bfree > st.Blocks || st.Bavail > st.Bfree ||
			st.Ffree > st.Files || st.Namelen < 255 || st.Frsize <= 0 {
			t.Fatalf("Statfs %s: %+v", filepath.Base(p), st)
		}
	}
}

// Mknod makes a fifo that works as one, and a socket.
func Mknod(t *testing.T, dir string) {
	withUmask(t, 022)
	p := filepath.Join(dir, "fifo")
	check(t, unix.Mkfifo(p, 0644), "Mkfifo")
	st := lstat(t, p)
	eq(t, "fifo type", st.Mode&unix.S_IFMT, unix.S_IFIFO)
	eq(t, "fifo mode", st.Mode&07777, 0644)
	r := open(t, p, os.O_RDONLY|unix.O_NONBLOCK, 0)
	w := open(t, p, os.O_WRONLY, 0)
	_, err := w.Write([]byte("through the fifo"))
	check(t, err, "write fifo")
	buf := make([]byte, 64)
	n, err := unix.Read(int(r.Fd()), buf)
	check(t, err, "read fifo")
	eq(t, "read from fifo", string(buf[:n]), "through the fifo")
	eq(t, "fifo size", lstat(t, p).Size, 0)

	s := filepath.Join(dir, "sock")
	check(t, unix.Mknod(s, unix.S_IFSOCK|0600, 0), "Mknod socket")
	eq(t, "socket type", lstat(t, s).Mode&unix.S_IFMT, unix.S_IFSOCK)
}

// MknodDevice makes character and block device nodes, as root: each
// keeps its type, device number and mode through a rename, a chmod and
// a listing. (cachefs keeps them as plain files on the host, the
// device in an xattr, and its mounts are nodev.)
func MknodDevice(t *testing.T, dir string) {
	requireRoot(t)
	withUmask(t, 022)
	for _, c := range []struct {
		name string
		typ  uint32
		dev  uint64
	}{{"null", unix.S_IFCHR, unix.Mkdev(1, 3)}, {"loop", unix.S_IFBLK, unix.Mkdev(7, 200)}} {
		p := filepath.Join(dir, c.name)
		check(t, unix.Mknod(p, c.typ|0640, int(c.dev)), "Mknod "+c.name)
		st := lstat(t, p)
		eq(t, c.name+" type", st.Mode&unix.S_IFMT, c.typ)
		eq(t, c.name+" rdev", st.Rdev, c.dev)
		eq(t, c.name+" mode", st.Mode&07777, 0640)
		eq(t, c.name+" size", st.Size, 0)
		q := p + ".moved"
		check(t, os.Rename(p, q), "Rename")
		check(t, unix.Chmod(q, 0600), "Chmod")
		st = lstat(t, q)
		eq(t, c.name+" type after rename", st.Mode&unix.S_IFMT, c.typ)
		eq(t, c.name+" rdev after rename", st.Rdev, c.dev)
		eq(t, c.name+" mode after chmod", st.Mode&07777, 0600)
		wantErrno(t, unix.Mknod(q, c.typ|0640, int(c.dev)), unix.EEXIST, "Mknod over "+c.name)
		var fs unix.Statfs_t
		check(t, unix.Statfs(dir, &fs), "Statfs")
		if fs.Flags&unix.ST_NODEV != 0 {
			_, err := unix.Open(q, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			wantErrno(t, err, unix.EACCES, "open of a device on a nodev mount")
		}
	}
	types := map[string]uint8{}
	for _, e := range readRest(t, openDir(t, dir), 4096) {
		types[e.Name] = e.Type
	}
	eq(t, "listed type of null", types["null.moved"], unix.DT_CHR)
	eq(t, "listed type of loop", types["loop.moved"], unix.DT_BLK)
}

package cachefs_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fileState is what a tree comparison looks at for one path.
type fileState struct {
	Mode     uint32
	Uid, Gid uint32
	Mtime    int64
	Data     string // a file's contents (a digest past wholeData), a symlink's target
	Xattrs   string // user.* names and values
	Links    string // the other names of a file with hard links in the tree
}

// fullTree returns the state of every path under root, reached
// through directory fds (trees deeper than PATH_MAX too).
func fullTree(t *testing.T, root string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	byIno := map[uint64][]string{}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatalf("open %s: %v", root, err)
	}
	walkTree(t, fd, "", "", out, byIno)
	for _, names := range byIno {
		if len(names) > 1 {
			slices.Sort(names)
			for _, n := range names {
				s := out[n]
				s.Links = strings.Join(names, ",")
				out[n] = s
			}
		}
	}
	return out
}

// walkTree notes name in dfd ("": dfd itself, then closed) as rel, and
// what is under it.
func walkTree(t *testing.T, dfd int, name, rel string, out map[string]fileState, byIno map[uint64][]string) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH); err != nil {
		t.Fatalf("stat %s: %v", rel, err)
	}
	p := fmt.Sprintf("/proc/self/fd/%d/%s", dfd, name)
	fs := fileState{Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Mtime: unix.TimespecToNsec(st.Mtim), Xattrs: userXattrs(p)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		data, err := fileData(p, st.Size)
		if err != nil {
			t.Fatalf("read %s: %v", rel, err)
		}
		fs.Data = data
		fs.Mode |= keptSetid(p)
		if typ, rdev, ok := keptDevice(p); ok { // the host's placeholder of a device
			fs.Mode, fs.Data = typ|st.Mode&07777, fmt.Sprint("device ", rdev)
			break
		}
		byIno[st.Ino] = append(byIno[st.Ino], rel)
	case unix.S_IFCHR, unix.S_IFBLK:
		fs.Data = fmt.Sprint("device ", st.Rdev)
	case unix.S_IFLNK:
		fs.Data, _ = os.Readlink(p)
	case unix.S_IFDIR:
		walkDir(t, dfd, name, rel, out, byIno)
	}
	out[rel] = fs
}

func walkDir(t *testing.T, dfd int, name, rel string, out map[string]fileState, byIno map[uint64][]string) {
	fd := dfd
	if name != "" {
		var err error
		if fd, err = unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0); err != nil {
			t.Fatalf("open %s: %v", rel, err)
		}
	}
	d := os.NewFile(uintptr(fd), rel)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		t.Fatalf("list %s: %v", rel, err)
	}
	for _, n := range names {
		walkTree(t, fd, n, filepath.Join(rel, n), out, byIno)
	}
}

func userXattrs(p string) string {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		return ""
	}
	var parts []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if strings.HasPrefix(name, "user.") && !strings.HasPrefix(name, "user.cachefs.") {
			v := make([]byte, 4096)
			k, _ := unix.Lgetxattr(p, name, v)
			parts = append(parts, name+"="+string(v[:max(k, 0)]))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}

// compareTrees fails the test where the trees differ.
func compareTrees(t *testing.T, what string, got, want map[string]fileState) {
	t.Helper()
	var diffs []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: missing (want %+v)", p, w))
		case g != w:
			diffs = append(diffs, fmt.Sprintf("%s: got %+v, want %+v", p, g, w))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: extra %+v", p, got[p]))
		}
	}
	slices.Sort(diffs)
	for _, d := range diffs {
		t.Errorf("%s: %s", what, d)
	}
}

// keptSetid returns the set-id bits the host server keeps for the
// regular file at p in its xattr, not in the file's mode (upstream's
// setidXattr): a host file the guest sees with them.
func keptSetid(p string) uint32 {
	buf := make([]byte, 8)
	n, err := unix.Getxattr(p, "user.cachefs.setid", buf)
	if err != nil {
		return 0
	}
	bits, err := strconv.ParseUint(string(buf[:n]), 8, 32)
	if err != nil {
		return 0
	}
	return uint32(bits) & (unix.S_ISUID | unix.S_ISGID)
}

// keptDevice returns the device type and number a host placeholder file
// stands for (upstream's user.cachefs.dev: "c 259"), if p is one.
func keptDevice(p string) (uint32, uint64, bool) {
	buf := make([]byte, 24)
	n, err := unix.Getxattr(p, "user.cachefs.dev", buf)
	if err != nil || n < 3 {
		return 0, 0, false
	}
	rdev, err := strconv.ParseUint(string(buf[2:n]), 10, 32)
	if err != nil {
		return 0, 0, false
	}
	if buf[0] == 'b' {
		return unix.S_IFBLK, rdev, true
	}
	return unix.S_IFCHR, rdev, true
}

// wholeData is the largest file a tree comparison holds whole; larger
// ones are compared by digest, so that a sparse file of some GiB (the
// suite's SparsePast2G) costs no memory.
const wholeData = 64 << 10

// fileData returns the contents of the file at p, of size bytes, or for
// a larger file its size and a digest of its non-zero 4 KiB blocks with
// their offsets: equal for equal contents whatever the holes, and read
// from the data extents only (SEEK_DATA), so a hole costs nothing.
func fileData(p string, size int64) (string, error) {
	if size <= wholeData {
		b, err := os.ReadFile(p)
		return string(b), err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	zero := make([]byte, 4096)
	for off := int64(0); off < size; {
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // only a hole follows
		} else if err != nil {
			return "", err
		}
		n, err := f.ReadAt(buf, data&^4095)
		if n == 0 {
			return "", fmt.Errorf("read at %d: %v", data, err)
		}
		for b := 0; b < n; b += 4096 {
			blk := buf[b:min(b+4096, n)]
			if !bytes.Equal(blk, zero[:len(blk)]) {
				fmt.Fprintf(h, "%d:", data&^4095+int64(b))
				h.Write(blk)
			}
		}
		off = data&^4095 + int64(n)
	}
	return fmt.Sprintf("%d bytes, digest %x", size, h.Sum(nil)), nil
}

// TestFileDataDigest: the digest of a large file is the same for the
// same contents with or without holes, and differs for one byte.
func TestFileDataDigest(t *testing.T) {
	dir := t.TempDir()
	size := int64(3 << 20)
	write := func(name string, dense bool, b byte) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if dense {
			f.Write(make([]byte, size))
		} else {
			f.Truncate(size)
		}
		f.WriteAt([]byte{b}, 2<<20+7)
		d, err := fileData(p, size)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	sparse, dense, other := write("s", false, 'x'), write("d", true, 'x'), write("o", false, 'y')
	if sparse != dense {
		t.Errorf("same contents, sparse and dense: %q != %q", sparse, dense)
	}
	if sparse == other {
		t.Errorf("contents differing in one byte, same digest %q", sparse)
	}
}

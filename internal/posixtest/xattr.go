package posixtest

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Extended attributes in the user namespace.

// Xattr sets, gets, lists and removes user attributes of a file and a
// directory, with empty and binary values.
func Xattr(t *testing.T, dir string) {
	p, d := filepath.Join(dir, "f"), filepath.Join(dir, "d")
	writeFile(t, p, "x")
	check(t, os.Mkdir(d, 0755), "Mkdir")
	binary := []byte("bin\x00ary\xff\x00")
	big := bytes.Repeat([]byte("0123456789"), 300)
	for _, path := range []string{p, d} {
		set := map[string][]byte{"user.a": []byte("v1"), "user.empty": {}, "user.bin": binary, "user.big": big}
		for name, v := range set {
			check(t, unix.Setxattr(path, name, v, 0), "Setxattr "+name)
		}
		for name, v := range set {
			buf := make([]byte, 4096)
			n, err := unix.Getxattr(path, name, buf)
			check(t, err, "Getxattr "+name)
			if !bytes.Equal(buf[:n], v) {
				t.Fatalf("Getxattr %s: got %q, want %q", name, buf[:n], v)
			}
		}
		eq(t, "user attributes listed", strings.Join(userXattrs(t, path), ","), "user.a,user.big,user.bin,user.empty")
		check(t, unix.Setxattr(path, "user.a", []byte("v2 longer"), 0), "Setxattr replace")
		buf := make([]byte, 64)
		n, err := unix.Getxattr(path, "user.a", buf)
		check(t, err, "Getxattr")
		eq(t, "replaced value", string(buf[:n]), "v2 longer")
		check(t, unix.Removexattr(path, "user.a"), "Removexattr")
		_, err = unix.Getxattr(path, "user.a", buf)
		wantErrno(t, err, unix.ENODATA, "Getxattr removed")
		wantErrno(t, unix.Removexattr(path, "user.a"), unix.ENODATA, "Removexattr again")
		eq(t, "user attributes after remove", strings.Join(userXattrs(t, path), ","), "user.big,user.bin,user.empty")
	}
}

// XattrErrors checks ENODATA, EEXIST and ERANGE, the size queries, and
// that symlinks take no user attributes.
func XattrErrors(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, "x")
	buf := make([]byte, 64)
	_, err := unix.Getxattr(p, "user.missing", buf)
	wantErrno(t, err, unix.ENODATA, "Getxattr missing")
	check(t, unix.Setxattr(p, "user.k", []byte("value"), 0), "Setxattr")
	n, err := unix.Getxattr(p, "user.k", nil)
	check(t, err, "Getxattr size query")
	eq(t, "size query", n, 5)
	_, err = unix.Getxattr(p, "user.k", make([]byte, 4))
	wantErrno(t, err, unix.ERANGE, "Getxattr small buffer")
	wantErrno(t, unix.Setxattr(p, "user.k", []byte("x"), unix.XATTR_CREATE), unix.EEXIST, "XATTR_CREATE existing")
	wantErrno(t, unix.Setxattr(p, "user.new", []byte("x"), unix.XATTR_REPLACE), unix.ENODATA, "XATTR_REPLACE missing")
	check(t, unix.Setxattr(p, "user.k", []byte("v"), unix.XATTR_REPLACE), "XATTR_REPLACE existing")
	check(t, unix.Setxattr(p, "user.new", []byte("n"), unix.XATTR_CREATE), "XATTR_CREATE new")

	size, err := unix.Listxattr(p, nil)
	check(t, err, "Listxattr size query")
	if size < len("user.k\x00user.new\x00") {
		t.Fatalf("Listxattr size query: got %d, want at least %d", size, len("user.k\x00user.new\x00"))
	}
	_, err = unix.Listxattr(p, make([]byte, 3))
	wantErrno(t, err, unix.ERANGE, "Listxattr small buffer")
	list := make([]byte, size)
	n, err = unix.Listxattr(p, list)
	check(t, err, "Listxattr exact buffer")
	eq(t, "list length", n, size)

	l := filepath.Join(dir, "l")
	check(t, os.Symlink("f", l), "Symlink")
	wantErrno(t, unix.Lsetxattr(l, "user.k", []byte("x"), 0), unix.EPERM, "Lsetxattr on symlink")
	_, err = unix.Lgetxattr(l, "user.k", buf)
	wantErrno(t, err, unix.ENODATA, "Lgetxattr on symlink")
	n, err = unix.Getxattr(l, "user.k", buf)
	check(t, err, "Getxattr through symlink")
	eq(t, "value through symlink", string(buf[:n]), "v")
}

// userXattrs lists path's user attributes, sorted.
func userXattrs(t *testing.T, path string) []string {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Listxattr(path, buf)
	check(t, err, "Listxattr")
	var out []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if strings.HasPrefix(name, "user.") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

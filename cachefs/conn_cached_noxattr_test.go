package cachefs_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/internal/harness"
	"golang.org/x/sys/unix"
)

// xattrRequests counts a connection's xattr requests.
func xattrRequests(st *cachefs.Stats) uint64 {
	var n uint64
	for _, k := range st.Kernel {
		switch k.Op {
		case "GETXATTR", "LISTXATTR", "SETXATTR", "REMOVEXATTR":
			n += k.Count
		}
	}
	return n
}

// warmLsL lists root with `ls -l` three times and returns the cached
// connection's FUSE requests during the third.
func warmLsL(t *testing.T, o harness.Options, files int) (all, xattr uint64) {
	env := harness.Start(t, o)
	dir := filepath.Join(env.Export, "src")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	registerCached(t, env, "src")
	root := containerView(t, env, "src")
	ls := func() {
		out, err := exec.Command("ls", "-l", root).CombinedOutput()
		if err != nil {
			t.Fatalf("ls -l: %v: %s", err, out)
		}
	}
	ls()
	ls()
	before := cachedConnStats(t, env)
	all, xattr = kernelTotal(before), xattrRequests(before)
	ls()
	after := cachedConnStats(t, env)
	return kernelTotal(after) - all, xattrRequests(after) - xattr
}

// A warm `ls -l` of a cached subtree asks the daemon for each file's
// xattrs, which the kernel does not cache; with --cached-xattrs=false
// the kernel stops asking after the first ENOSYS and answers alone.
func TestCachedConnNoXattrs(t *testing.T) {
	const files = 50
	all, xattr := warmLsL(t, harness.Options{}, files)
	if xattr < files {
		t.Errorf("with xattrs: warm ls -l of %d files sent %d xattr requests (of %d), want one a file at least", files, xattr, all)
	}
	all, xattr = warmLsL(t, harness.Options{NoCachedXattrs: true}, files)
	if all != 0 {
		t.Errorf("without xattrs: warm ls -l of %d files sent %d FUSE requests (%d xattr), want 0", files, all, xattr)
	}
}

// Without xattrs a cached subtree refuses them as a file system without
// xattr support does, and the kernel asks the daemon once for each kind.
func TestCachedConnNoXattrsRefuses(t *testing.T) {
	env := harness.Start(t, harness.Options{NoCachedXattrs: true})
	dir := filepath.Join(env.Export, "src")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(dir, "f"), "user.k", []byte("v"), 0); err != nil {
		t.Skipf("host has no user xattrs: %v", err)
	}
	registerCached(t, env, "src")
	f := filepath.Join(containerView(t, env, "src"), "f")
	buf := make([]byte, 64)
	for range 3 {
		if _, err := unix.Getxattr(f, "user.k", buf); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("getxattr: %v, want EOPNOTSUPP", err)
		}
		if _, err := unix.Listxattr(f, buf); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("listxattr: %v, want EOPNOTSUPP", err)
		}
		if err := unix.Setxattr(f, "user.k", []byte("w"), 0); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("setxattr: %v, want EOPNOTSUPP", err)
		}
		if err := unix.Removexattr(f, "user.k"); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("removexattr: %v, want EOPNOTSUPP", err)
		}
	}
	if got := xattrRequests(cachedConnStats(t, env)); got != 4 {
		t.Errorf("%d xattr requests reached the daemon, want 4 (one ENOSYS each)", got)
	}
	got := make([]byte, 8)
	if n, err := unix.Getxattr(filepath.Join(dir, "f"), "user.k", got); err != nil || string(got[:n]) != "v" {
		t.Errorf("host xattr: %q, %v; want it untouched", got[:n], err)
	}
}

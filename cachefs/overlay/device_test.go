package overlay

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDeviceWrittenBack: a device node made in the upper directory is
// written back as the host's placeholder of it (a regular file whose
// user.cachefs.dev names the device), chmod and all, and a rename of it
// moves the placeholder.
func TestDeviceWrittenBack(t *testing.T) {
	f := newFixture(t)
	rdev := unix.Mkdev(1, 3)
	if err := unix.Mknod(filepath.Join(f.upper, "null"), unix.S_IFCHR|0o600, int(rdev)); err != nil {
		t.Skipf("mknod: %v", err)
	}
	f.flush()
	wantPlaceholder(t, filepath.Join(f.h.export, "null"), "c 259", 0o600)
	unix.Chmod(filepath.Join(f.upper, "null"), 0o644)
	unix.Rename(filepath.Join(f.upper, "null"), filepath.Join(f.upper, "zero"))
	f.flush()
	f.wantHost("null", "-")
	wantPlaceholder(t, filepath.Join(f.h.export, "zero"), "c 259", 0o644)
}

func wantPlaceholder(t *testing.T, p, dev string, perm uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatalf("host %s: %v", p, err)
	}
	buf := make([]byte, 32)
	n, err := unix.Lgetxattr(p, "user.cachefs.dev", buf)
	if err != nil || string(buf[:n]) != dev || st.Mode != unix.S_IFREG|perm {
		t.Errorf("host %s: mode %o, user.cachefs.dev %q (%v); want a regular file %o of device %q", p, st.Mode, buf[:max(n, 0)], err, perm, dev)
	}
}

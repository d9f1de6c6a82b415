package overlay

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListXattrAt: listxattrat(2) and the /proc/self/fd path give the
// same names, a symlink's own (none), not its target's.
func TestListXattrAt(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(f, "user.a", []byte("1"), 0); err != nil {
		t.Skipf("no user xattrs in %s: %v", dir, err)
	}
	if err := unix.Setxattr(f, "user.b", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	dfd, err := openDir(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	for _, c := range []struct {
		name string
		want []string
	}{{"f", []string{"user.a", "user.b"}}, {"l", nil}} {
		for _, fallback := range []bool{false, true} {
			noListxattrat.Store(fallback)
			got, err := listXattrAt(dfd, c.name, fdPath(dfd, c.name))
			slices.Sort(got)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("listXattrAt %s (fallback %v): got %q, %v, want %q", c.name, fallback, got, err, c.want)
			}
		}
	}
	noListxattrat.Store(false)
	if _, err := listXattrAt(dfd, "missing", fdPath(dfd, "missing")); err != unix.ENOENT {
		t.Errorf("listXattrAt missing: got %v, want ENOENT", err)
	}
}

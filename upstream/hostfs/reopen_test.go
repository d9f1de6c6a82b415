package hostfs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReopenAt: the portable reopen reaches the node's inode through
// its parent, and nothing else: a name the host replaced is ESTALE and
// is not truncated, a symlink is not followed.
func TestReopenAt(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(f, &st); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	dev, ino := uint64(st.Dev), st.Ino

	fd, err := ReopenAt(dfd, "f", unix.O_RDWR|unix.O_TRUNC, dev, ino)
	if err != nil {
		t.Fatalf("ReopenAt of the same inode: %v", err)
	}
	unix.Close(fd)
	if b, _ := os.ReadFile(f); len(b) != 0 {
		t.Errorf("O_TRUNC on the same inode: got %q, want empty", b)
	}

	os.WriteFile(filepath.Join(dir, "g"), []byte("keep"), 0o644)
	os.Rename(filepath.Join(dir, "g"), f)
	if fd, err := ReopenAt(dfd, "f", unix.O_RDWR|unix.O_TRUNC, dev, ino); err != unix.ESTALE {
		unix.Close(fd)
		t.Errorf("ReopenAt of a replaced name: got %v, want ESTALE", err)
	}
	if b, _ := os.ReadFile(f); string(b) != "keep" {
		t.Errorf("the file that replaced the node's: got %q, want %q", b, "keep")
	}

	os.Remove(f)
	os.Symlink("g", f)
	if fd, err := ReopenAt(dfd, "f", unix.O_RDONLY, dev, ino); err != unix.ESTALE {
		unix.Close(fd)
		t.Errorf("ReopenAt of a symlink: got %v, want ESTALE", err)
	}
}

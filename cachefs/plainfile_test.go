package cachefs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestReadPlain: the contents come back whole in a buffer of the file's
// size, not a grown one.
func TestReadPlain(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 511, 512, 4096, 1 << 20} {
		p := filepath.Join(dir, "f")
		want := bytes.Repeat([]byte{'x'}, size)
		if err := os.WriteFile(p, want, 0600); err != nil {
			t.Fatal(err)
		}
		got, err := readPlain(p)
		if err != nil {
			t.Fatalf("readPlain(%d bytes): %v", size, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("readPlain(%d bytes): got %d bytes, want the file", size, len(got))
		}
		if cap(got) != size {
			t.Errorf("readPlain(%d bytes): buffer of %d bytes, want %d", size, cap(got), size)
		}
	}
	if _, err := readPlain(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("readPlain(missing): %v, want not exist", err)
	}
}

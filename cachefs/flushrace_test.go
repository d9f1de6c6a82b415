package cachefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// What a closed file held is on the host once a flush that starts after
// the close returns: close(2) does not wait for the kernel's RELEASE, so
// the data is queued at FLUSH, which it does wait for.
func TestFlushAfterCloseHasData(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	for i := 0; i < 200; i++ {
		name := fmt.Sprintf("f%d", i)
		want := fmt.Sprintf("data %d", i)
		if err := os.WriteFile(filepath.Join(env.Mountpoint, name), []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		if failed := env.FS.WriteBack(); len(failed) > 0 {
			t.Fatalf("write-back failures: %+v", failed)
		}
		if got, err := os.ReadFile(filepath.Join(export, name)); err != nil || string(got) != want {
			t.Fatalf("file %d on the host after close and flush: %q, %v; want %q", i, got, err, want)
		}
	}
}

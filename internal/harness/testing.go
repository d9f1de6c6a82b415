package harness

import (
	"os"
	"testing"
)

// Start launches an Env for a test on fresh temporary directories
// (unless o names them) and closes it in t.Cleanup. It skips the test
// when /dev/fuse is missing.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE: %v", err)
	}
	if o.Export == "" {
		o.Export = t.TempDir()
	}
	if o.Mountpoint == "" {
		o.Mountpoint = t.TempDir()
	}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	if o.StateDir == "" && o.FS.StateDir == "" {
		o.StateDir = t.TempDir()
	}
	e, err := Launch(o)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return e
}

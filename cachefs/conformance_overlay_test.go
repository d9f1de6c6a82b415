package cachefs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"golang.org/x/sys/unix"
)

// TestConformanceOverlay runs the POSIX suite in a delegated subtree
// served by an overlay (Options.Overlays), each test in a directory of
// its own, and writes everything back at the end: the host's tree is then
// the guest's (device nodes as the host's placeholders of them).
func TestConformanceOverlay(t *testing.T) {
	export := t.TempDir()
	env, dir := ovlSubtree(t, export)
	var st unix.Stat_t
	if err := unix.Stat(env.Mountpoint, &st); err != nil {
		t.Fatalf("Stat mountpoint: %v", err)
	}
	runSuite(t, func(t *testing.T, name string) string {
		if why, ok := knownBug("overlay", name); ok {
			t.Skip("cachefs bug: " + why)
		}
		watchdog(t, st.Dev)
		d, err := os.MkdirTemp(dir, "t")
		if err != nil {
			t.Fatalf("MkdirTemp: %v", err)
		}
		return d
	})
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Errorf("write-back after the suite: %+v", failed)
	}
	compareTrees(t, "host after the suite", fullTree(t, filepath.Join(export, "ovl")), fullTree(t, dir))
}

// ovlSubtree starts a mount of export with overlays on and registers its
// subtree "ovl" (made here) delegated; it returns the mount and the
// overlay's path in it. Not root: the test is skipped.
func ovlSubtree(t *testing.T, export string) (*harness.Env, string) {
	t.Helper()
	requireOverlays(t)
	os.Mkdir(filepath.Join(export, "ovl"), 0o777)
	env := harness.Start(t, harness.Options{Export: export, FS: cachefs.Options{Overlays: true}})
	env.FS.Register("ovl", consistency.Delegated)
	dir := filepath.Join(env.Mountpoint, "ovl")
	if !isOverlay(t, dir) {
		t.Fatalf("%s is not an overlay", dir)
	}
	return env, dir
}

package cachefs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOverlayRelativeStateDir: with a relative state directory the
// overlay's upperdir is still absolute in mountinfo, where a restarted
// daemon looks for the overlays a killed one left.
func TestOverlayRelativeStateDir(t *testing.T) {
	requireOverlays(t)
	export, state := t.TempDir(), t.TempDir()
	cwd, _ := os.Getwd()
	rel, err := filepath.Rel(cwd, state)
	if err != nil || filepath.IsAbs(rel) {
		t.Skipf("no relative path to %s: %v", state, err)
	}
	writeTree(t, export, map[string]string{"sub/f": "f"})
	env := overlayEnv(t, export, rel, "sub")
	mnt := filepath.Join(env.Mountpoint, "sub")
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, " "+mnt+" ") {
			continue
		}
		i := strings.Index(line, "upperdir=")
		if i < 0 {
			continue
		}
		if up := line[i+len("upperdir="):]; !strings.HasPrefix(up, "/") {
			t.Errorf("overlay at %s: upperdir=%s, want an absolute path", mnt, up)
		}
		return
	}
	t.Errorf("no overlay with an upperdir at %s in mountinfo", mnt)
}

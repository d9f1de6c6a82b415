package cachefs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
)

// overlayEnv starts a mount with overlays on, over export, and
// registers sub delegated. Cached names and attributes expire at once
// (CacheTTL 1ns), as they would after the TTL: every use of an overlay's
// lower dentry revalidates it with a LOOKUP that reaches the host.
func overlayEnv(t *testing.T, export, state, sub string) *harness.Env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("overlays need root")
	}
	env := harness.Start(t, harness.Options{Export: export, StateDir: state, CacheTTL: time.Nanosecond,
		FS: cachefs.Options{Overlays: true}})
	env.FS.Register(sub, consistency.Delegated)
	if !isOverlay(t, filepath.Join(env.Mountpoint, sub)) {
		t.Fatalf("%s is not an overlay mount", sub)
	}
	return env
}

// isOverlay reports whether dir is an overlay's root.
func isOverlay(t *testing.T, dir string) bool {
	var st unixStatfs
	if err := statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return st.Type == overlayMagic
}

// flushAll writes everything back and fails the test on failures.
func flushAll(t *testing.T, env *harness.Env) {
	t.Helper()
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
}

func readWant(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil || string(b) != want {
		t.Errorf("read %s: %q, %v; want %q", p, b, err, want)
	}
}

// TestOverlayRenamedLowerDirectory renames a lower directory with files
// in a delegated overlay subtree and writes it back: the host renames
// it, and the files inside still read through the overlay (no ESTALE
// from its lower dentries, which the host no longer has under their
// old name), also after the kernel was told to drop every name, and
// after the daemon restarted.
func TestOverlayRenamedLowerDirectory(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	writeTree(t, export, map[string]string{"sub/d1/f": "f", "sub/d1/inner/g": "g", "sub/file": "file", "elsewhere/x": ""})
	env := overlayEnv(t, export, state, "sub")
	mnt := filepath.Join(env.Mountpoint, "sub")
	readWant(t, filepath.Join(mnt, "d1/f"), "f")
	readWant(t, filepath.Join(mnt, "d1/inner/g"), "g")
	if err := os.Rename(filepath.Join(mnt, "d1"), filepath.Join(mnt, "d2")); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if err := os.Rename(filepath.Join(mnt, "file"), filepath.Join(mnt, "d2/file2")); err != nil {
		t.Fatalf("rename: %v", err)
	}
	flushAll(t, env)
	readWant(t, filepath.Join(export, "sub/d2/f"), "f")
	readWant(t, filepath.Join(export, "sub/d2/file2"), "file")
	if _, err := os.Stat(filepath.Join(export, "sub/d1")); !os.IsNotExist(err) {
		t.Errorf("host sub/d1 after the rename: %v", err)
	}
	readWant(t, filepath.Join(mnt, "d2/f"), "f")
	readWant(t, filepath.Join(mnt, "d2/inner/g"), "g")
	readWant(t, filepath.Join(mnt, "d2/file2"), "file")
	env.FS.Register("elsewhere", consistency.Cached) // drops every name the kernel caches
	readWant(t, filepath.Join(mnt, "d2/f"), "f")
	readWant(t, filepath.Join(mnt, "d2/inner/g"), "g")
	readWant(t, filepath.Join(mnt, "d2/file2"), "file")
	env.Close()
	env = overlayEnv(t, export, state, "sub")
	mnt = filepath.Join(env.Mountpoint, "sub")
	readWant(t, filepath.Join(mnt, "d2/f"), "f")
	readWant(t, filepath.Join(mnt, "d2/inner/g"), "g")
}

// writeTree makes files under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

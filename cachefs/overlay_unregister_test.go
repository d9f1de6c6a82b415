package cachefs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/upstream"
)

// TestOverlayFailuresAndUnregister: a change the write-back refuses (a
// file named as its park names) is reported by the flush with its path and errno, until it
// goes; unregistering the last delegated registration writes back,
// unmounts the overlay and removes its directories, and the path is
// the mount's cached view again.
func TestOverlayFailuresAndUnregister(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	writeTree(t, export, map[string]string{"sub/f": "f"})
	env := overlayEnv(t, export, state, "sub")
	mnt := filepath.Join(env.Mountpoint, "sub")
	id2 := env.FS.Register("sub", consistency.Delegated) // a second container
	if err := os.WriteFile(filepath.Join(mnt, upstream.ParkPrefix+"1"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mnt, "g"), []byte("g"), 0o644)
	failed := env.FS.WriteBack()
	if len(failed) != 1 || failed[0].Path != "sub/"+upstream.ParkPrefix+"1" || failed[0].Op != "name" || !strings.Contains(failed[0].Errno, "not permitted") {
		t.Errorf("failures %+v, want sub/%s1 name EPERM", failed, upstream.ParkPrefix)
	}
	readWant(t, filepath.Join(export, "sub/g"), "g")
	os.Remove(filepath.Join(mnt, upstream.ParkPrefix+"1"))
	flushAll(t, env)
	if err := env.FS.Unregister(id2); err != nil {
		t.Fatalf("Unregister (not the last): %v", err)
	}
	if !isOverlay(t, mnt) {
		t.Fatalf("the overlay went with a registration left")
	}
	os.WriteFile(filepath.Join(mnt, "h"), []byte("h"), 0o644)
	if err := env.FS.Unregister(id2); err != nil {
		t.Fatalf("Unregister (the last): %v", err)
	}
	if isOverlay(t, mnt) {
		t.Errorf("%s is still an overlay after the last unregister", mnt)
	}
	readWant(t, filepath.Join(export, "sub/h"), "h")
	readWant(t, filepath.Join(mnt, "h"), "h")
	if left, _ := os.ReadDir(filepath.Join(state, "overlay")); len(left) != 0 {
		t.Errorf("the overlay's directories are left: %v", left)
	}
}

// TestOverlayConflicts: a host change to a file the guest changed is
// counted as a conflict; one to a file the guest did not touch is not.
func TestOverlayConflicts(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	writeTree(t, export, map[string]string{"sub/mine": "host", "sub/theirs": "host"})
	env := overlayEnvHeld(t, export, state, "sub")
	mnt := filepath.Join(env.Mountpoint, "sub")
	readWant(t, filepath.Join(mnt, "theirs"), "host")
	if err := os.WriteFile(filepath.Join(mnt, "mine"), []byte("guest"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(export, "sub/theirs"), []byte("host 2"), 0o644)
	os.WriteFile(filepath.Join(export, "sub/mine"), []byte("host 2"), 0o644)
	conflicts := func() uint64 {
		st := env.FS.Stats()
		if len(st.Overlays) != 1 {
			t.Fatalf("stats of %d overlays, want 1", len(st.Overlays))
		}
		return st.Overlays[0].Conflicts
	}
	for deadline := time.Now().Add(20 * time.Second); conflicts() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := conflicts(); n != 1 {
		t.Errorf("%d conflicts, want 1 (mine)", n)
	}
	flushAll(t, env)
	readWant(t, filepath.Join(export, "sub/mine"), "guest")
}

//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/invalidation"
)

// TestLocalStateDirUnwatched runs `cachefsd local` in delegated mode
// with its state directory on the export's filesystem (a tmpfs of the
// test's own), as under /var/lib/cachefsd on a root filesystem
// exported: the host's fanotify mark covers the filesystem, yet no
// event of the guest's staging files and journal is read (none is
// filtered), while the files written back to the export are seen.
func TestLocalStateDirUnwatched(t *testing.T) {
	requireFUSE(t)
	disk := mountTmpfs(t, 64<<20)
	export, state, mnt := filepath.Join(disk, "export"), filepath.Join(disk, "state"), t.TempDir()
	if err := os.Mkdir(export, 0755); err != nil {
		t.Fatal(err)
	}
	_, g, pol, err := parseGuest("local", []string{"--export", export, "--default-mode", "delegated", "--overlay=false",
		"--state-dir", state, mnt}, new(string), "export", "")
	if err != nil {
		t.Fatalf("parseGuest: %v", err)
	}
	o := g.localOptions(export, mnt, pol, nil)
	o.Logf = t.Logf
	env := harness.Start(t, o)
	if w := env.Server.Stats().Watch; w.Kind != invalidation.Fanotify {
		t.Skipf("watching with %v, not fanotify: %s", w.Kind, w.Fallback)
	}
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("f%02d", i)), pattern(i, 64<<10), 0644); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %v", failed)
	}
	if _, err := os.Stat(filepath.Join(export, "f19")); err != nil {
		t.Fatalf("host f19: %v", err)
	}
	// A change on the host reaches the guest once the watcher has read
	// every event before it: those of the staging files included.
	if err := os.WriteFile(filepath.Join(export, "marker"), nil, 0644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(hangBound); env.FS.Stats().Events.Events == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the host's change never reached the guest")
		}
	}
	w := env.Server.Stats().Watch
	t.Logf("host watcher: %d events read, %d filtered; guest: %d events", w.Events, w.Filtered, env.FS.Stats().Events.Events)
	if w.Filtered != 0 {
		t.Errorf("host watcher: %d events read, %d filtered (outside the export); want none from the state directory", w.Events, w.Filtered)
	}
}

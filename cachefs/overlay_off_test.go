package cachefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// TestOverlaysOff: where overlays are asked for but cannot be used, a
// delegated registration is FUSE delegated (its write reaches the host
// at a flush), Stats.OverlaysOff says why, and the log says it once
// however many registrations fall back.
func TestOverlaysOff(t *testing.T) {
	requireOverlays(t)
	cases := []struct {
		name  string
		setup func(o *harness.Options, state string)
		want  string
	}{
		{"NoTreeWB", func(o *harness.Options, _ string) { o.Server.WithheldFeatures = upstream.FeatTreeWB }, "FeatTreeWB"},
		{"StateDirNoUpper", func(o *harness.Options, _ string) {
			o.StateDir = overlayDir(t) // as for a daemon in a container: overlayfs is no upper layer
		}, "not supported as upperdir"},
		{"StateDirBroken", func(_ *harness.Options, state string) {
			os.WriteFile(filepath.Join(state, "overlay"), nil, 0o600) // no directory can be made there
		}, "not a directory"},
		{"TurnedOff", func(o *harness.Options, _ string) { o.FS.Overlays = false }, "turned off"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			export, state := t.TempDir(), t.TempDir()
			writeTree(t, export, map[string]string{"a/f": "f", "b/f": "f"})
			var logs logLines
			o := harness.Options{Export: export, StateDir: state, CacheTTL: time.Nanosecond,
				FS: cachefs.Options{Overlays: true}, Logf: logs.logf(t)}
			c.setup(&o, state)
			env := harness.Start(t, o)
			for _, sub := range []string{"a", "b"} {
				env.FS.Register(sub, consistency.Delegated)
				mnt := filepath.Join(env.Mountpoint, sub)
				if isOverlay(t, mnt) {
					t.Fatalf("%s is an overlay", sub)
				}
				if err := os.WriteFile(filepath.Join(mnt, "new"), []byte(sub), 0o644); err != nil {
					t.Fatalf("write: %v", err)
				}
			}
			flushAll(t, env)
			readWant(t, filepath.Join(export, "a/new"), "a")
			readWant(t, filepath.Join(export, "b/new"), "b")
			if got := env.FS.Stats().OverlaysOff; !strings.Contains(got, c.want) {
				t.Errorf("Stats.OverlaysOff %q, want it to say %q", got, c.want)
			}
			wantLogs := 1
			if c.name == "TurnedOff" {
				wantLogs = 0
			}
			if n := logs.count("not overlays"); n != wantLogs {
				t.Errorf("%d log lines say why not overlays, want %d", n, wantLogs)
			}
		})
	}
}

// overlayDir returns an overlay mount of empty directories, unmounted
// at the test's end.
func overlayDir(t *testing.T) string {
	d := t.TempDir()
	for _, s := range []string{"l", "u", "w", "o"} {
		os.Mkdir(filepath.Join(d, s), 0o700)
	}
	o := filepath.Join(d, "o")
	opts := "lowerdir=" + filepath.Join(d, "l") + ",upperdir=" + filepath.Join(d, "u") + ",workdir=" + filepath.Join(d, "w")
	if err := unix.Mount("overlay", o, "overlay", 0, opts); err != nil {
		t.Fatalf("mount overlay: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(o, unix.MNT_DETACH) })
	return o
}

// TestOverlaysOn: with overlays usable, Stats lists the overlay and
// OverlaysOff is empty.
func TestOverlaysOn(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	writeTree(t, export, map[string]string{"sub/f": "f"})
	env := overlayEnv(t, export, state, "sub")
	st := env.FS.Stats()
	if st.OverlaysOff != "" || len(st.Overlays) != 1 || st.Overlays[0].Path != "sub" {
		t.Errorf("Stats: OverlaysOff %q, Overlays %+v; want no reason and the overlay of sub", st.OverlaysOff, st.Overlays)
	}
}

// logLines records log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(t *testing.T) func(string, ...any) {
	return func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		l.mu.Lock()
		l.lines = append(l.lines, s)
		l.mu.Unlock()
		t.Log(s)
	}
}

// count returns how many lines contain s.
func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// TestOverlayOrphanRecovered: an overlay directory a daemon kept as an
// orphan (one the host did not take whole) is written back by the next
// daemon's start, as the numbered ones are; the probe's directory is no
// overlay's.
func TestOverlayOrphanRecovered(t *testing.T) {
	requireOverlays(t)
	export, state := t.TempDir(), t.TempDir()
	writeTree(t, export, map[string]string{"sub/f": "f"})
	writeTree(t, filepath.Join(state, "overlay", ".orphan-0"), map[string]string{"prefix": "sub", "upper/kept": "kept"})
	writeTree(t, filepath.Join(state, "overlay", ".probe"), map[string]string{"prefix": "sub", "upper/probe": "probe"})
	harness.Start(t, harness.Options{Export: export, StateDir: state, FS: cachefs.Options{Overlays: true}})
	readWant(t, filepath.Join(export, "sub/kept"), "kept")
	if _, err := os.Stat(filepath.Join(export, "sub/probe")); err == nil {
		t.Errorf("the probe's directory was written back as an overlay's")
	}
	if left, _ := os.ReadDir(filepath.Join(state, "overlay")); len(left) != 0 {
		t.Errorf("state directory keeps %v after the recovery", left)
	}
}

//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOverlayDefault: `ctl register --mode delegated` of `cachefsd mount`
// and `cachefsd local` without --overlay mounts an overlay on the
// subtree, ctl stats lists it, ctl flush puts its write on the host,
// and ctl unregister takes the overlay away; with --overlay=false the
// subtree is FUSE delegated and ctl stats says why.
func TestOverlayDefault(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("overlays need root")
	}
	cases := []struct {
		name    string
		argv    func(p paths) []string
		overlay bool
	}{
		{"local", func(p paths) []string { return []string{"local", "--export", p.export} }, true},
		{"mount", func(p paths) []string {
			startServe(t, p.export, p.sock, false)
			return []string{"mount", "--upstream", "unix://" + p.sock}
		}, true},
		{"local-overlay=false", func(p paths) []string { return []string{"local", "--export", p.export, "--overlay=false"} }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPaths(t)
			os.Mkdir(filepath.Join(p.export, "sub"), 0o755)
			argv := append(c.argv(p), "--state-dir", t.TempDir())
			startGuest(t, argv[0], p.mnt, p.ctl, argv...)
			sub := filepath.Join(p.mnt, "sub")
			id := strings.TrimSpace(ctlOK(t, p.ctl, "register", "--mode", "delegated", sub))
			if got := isOverlayMount(t, sub); got != c.overlay {
				t.Fatalf("%s is an overlay: %v, want %v", sub, got, c.overlay)
			}
			if err := os.WriteFile(filepath.Join(sub, "f"), []byte("guest"), 0o644); err != nil {
				t.Fatalf("write: %v", err)
			}
			want := "delegated registrations: overlays, 1 mounted\n  overlay /sub: "
			if !c.overlay {
				want = "delegated registrations: FUSE (not overlays: turned off"
			}
			if out := ctlOK(t, p.ctl, "stats"); !strings.Contains(out, want) {
				t.Errorf("ctl stats has no %q:\n%s", want, out)
			}
			ctlOK(t, p.ctl, "flush")
			if b, err := os.ReadFile(filepath.Join(p.export, "sub/f")); string(b) != "guest" {
				t.Errorf("host sub/f after ctl flush: %q, %v; want \"guest\"", b, err)
			}
			ctlOK(t, p.ctl, "unregister", id)
			if isOverlayMount(t, sub) {
				t.Errorf("%s is still an overlay after ctl unregister", sub)
			}
		})
	}
}

// isOverlayMount reports whether dir is an overlay's root.
func isOverlayMount(t *testing.T, dir string) bool {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return st.Type == unix.OVERLAYFS_SUPER_MAGIC
}

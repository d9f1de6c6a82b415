//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOverlayDefault: `ctl register --mode delegated` of `cachefsd mount`
// and `cachefsd local` without --overlay mounts an overlay on the
// subtree, ctl stats lists it, ctl flush puts its write on the host,
// and ctl unregister takes the overlay away; with --overlay=false the
// subtree is FUSE delegated and ctl stats says why.
func TestOverlayDefault(t *testing.T) {
	requireOverlays(t)
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

// TestGuestKilledOverlay kills with SIGKILL the daemon of a mount whose
// subtree is registered delegated (an overlay, by default) and starts it
// again on the same state directory, without unmounting anything by
// hand (the new daemon detaches the dead mount and the overlay on it).
// Changes written back before (new files, a renamed host directory), and
// those made after with the host server stopped (which only the upper
// directory on the guest's disk holds: fsynced and closed files, a
// directory, a rename, an unlink of a host file, a chmod; no copy-up,
// which reads the host's file), are on the host once the new daemon has
// started, and the mount shows them when the subtree is registered
// again: the host tree equals the same changes made on a plain
// directory.
func TestGuestKilledOverlay(t *testing.T) {
	requireOverlays(t)
	p, model, state := newPaths(t), filepath.Join(t.TempDir(), "sub"), t.TempDir()
	for _, root := range []string{filepath.Join(p.export, "sub"), model} {
		os.MkdirAll(filepath.Join(root, "hdir"), 0o755)
		os.Chmod(root, 0o755)
		os.WriteFile(filepath.Join(root, "h1"), pattern(1, 3000), 0o644)
		os.WriteFile(filepath.Join(root, "hdir", "h2"), pattern(2, 3000), 0o644)
	}
	srv := startServe(t, p.export, p.sock, false)
	argv := []string{"mount", "--upstream", "unix://" + p.sock, "--state-dir", state, "--default-mode", "cached"}
	guest := startGuest(t, "mount", p.mnt, p.ctl, argv...)
	sub := filepath.Join(p.mnt, "sub")
	ctlOK(t, p.ctl, "register", "--mode", "delegated", sub)
	if !isOverlayMount(t, sub) {
		t.Fatalf("%s is not an overlay", sub)
	}
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("synced%02d", i)
		both(t, sub, model, func(root string) error { return writeSynced(root, name, i) })
	}
	both(t, sub, model, func(root string) error {
		return os.Rename(filepath.Join(root, "hdir"), filepath.Join(root, "hdir2"))
	})
	ctlOK(t, p.ctl, "flush")
	wantContent(t, filepath.Join(p.export, "sub", "synced04"), pattern(4, 10004))

	// The first lookup of a name in a directory the host has (a merged
	// one) goes through the lower layer to the host, and so does a path
	// walk through a consistent directory (docs/overlay.md, "Limits"):
	// the mount's default mode is cached, and the names the changes
	// below make in merged directories are looked up with the host
	// running, after the host's events of the write-back above dropped
	// what the view had of them.
	time.Sleep(time.Second)
	for _, name := range []string{".", "dir", "fsynced", "h1"} {
		os.Lstat(filepath.Join(sub, name))
	}
	srv.cmd.Process.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { srv.cmd.Process.Signal(syscall.SIGCONT) })
	journaledChanges(t, sub, model)
	both(t, sub, model, func(root string) error { return writeSynced(root, "fsynced", 100) })
	both(t, sub, model, func(root string) error { return os.Remove(filepath.Join(root, "h1")) })
	both(t, sub, model, func(root string) error { return os.Chmod(filepath.Join(root, "synced01"), 0o600) })
	time.Sleep(100 * time.Millisecond) // a write-back pass starts, and waits for the stopped host

	guest.kill(t)
	os.Remove(p.ctl) // the killed daemon's: wait for the next one's
	srv.cmd.Process.Signal(syscall.SIGCONT)
	startGuest(t, "mount", p.mnt, p.ctl, argv...) // writes the upper directory back before mounting
	want := treeOf(t, model)
	sameTree(t, "host after the restart", treeOf(t, filepath.Join(p.export, "sub")), want)
	ctlOK(t, p.ctl, "register", "--mode", "delegated", sub)
	sameTree(t, "overlay after the restart", treeOf(t, sub), want)
	if left, _ := os.ReadDir(filepath.Join(state, "overlay")); len(left) != 1 {
		t.Errorf("the state directory's overlays: %v, want the new registration's alone", left)
	}
}

// TestDefaultModeDelegatedOverlay: `--default-mode delegated` delegates
// the mount root as an overlay over the mountpoint (the main connection
// serving its cached lower view): the guest's changes land in its upper
// directory, ctl stats and ctl modes show it, ctl flush puts them on the
// host, a cached registration inside still binds its view, and a stop
// writes back and leaves no mount.
func TestDefaultModeDelegatedOverlay(t *testing.T) {
	requireOverlays(t)
	p := newPaths(t)
	os.Mkdir(filepath.Join(p.export, "sub"), 0o755)
	os.WriteFile(filepath.Join(p.export, "sub/host"), []byte("host"), 0o644)
	d := startGuest(t, "local", p.mnt, p.ctl, "local", "--export", p.export, "--default-mode", "delegated",
		"--state-dir", t.TempDir())
	if !isOverlayMount(t, p.mnt) {
		t.Fatalf("%s is not an overlay with --default-mode delegated", p.mnt)
	}
	if err := os.WriteFile(filepath.Join(p.mnt, "f"), []byte("guest"), 0o644); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := os.Mkdir(filepath.Join(p.mnt, "sub/d"), 0o755); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(p.mnt, "sub/host")); string(b) != "host" {
		t.Errorf("sub/host through the overlay: %q, %v", b, err)
	}
	out := ctlOK(t, p.ctl, "stats")
	if !strings.Contains(out, "delegated registrations: overlays, 1 mounted\n  overlay /: ") {
		t.Errorf("ctl stats shows no overlay of the root:\n%s", out)
	}
	if out := ctlOK(t, p.ctl, "modes"); !strings.Contains(out, "delegated\t/\t") {
		t.Errorf("ctl modes shows no delegated root:\n%s", out)
	}
	ctlOK(t, p.ctl, "flush")
	if b, err := os.ReadFile(filepath.Join(p.export, "f")); string(b) != "guest" {
		t.Errorf("host f after ctl flush: %q, %v; want \"guest\"", b, err)
	}
	if fi, err := os.Stat(filepath.Join(p.export, "sub/d")); err != nil || !fi.IsDir() {
		t.Errorf("host sub/d after ctl flush: %v", err)
	}
	sub := filepath.Join(p.mnt, "sub")
	ctlOK(t, p.ctl, "register", "--mode", "cached", sub)
	if b, err := os.ReadFile(filepath.Join(sub, "host")); string(b) != "host" {
		t.Errorf("sub/host through the cached registration: %q, %v", b, err)
	}
	os.WriteFile(filepath.Join(p.mnt, "g"), []byte("late"), 0o644)
	d.cmd.Process.Signal(syscall.SIGTERM)
	if !d.wait(30 * time.Second) {
		t.Fatalf("still running 30s after SIGTERM")
	}
	if b, err := os.ReadFile(filepath.Join(p.export, "g")); string(b) != "late" {
		t.Errorf("host g after the stop: %q, %v; want \"late\"", b, err)
	}
	if b, err := os.ReadFile("/proc/self/mounts"); err != nil || strings.Contains(string(b), " "+p.mnt+" ") {
		t.Errorf("a mount left at %s after the stop (%v)", p.mnt, err)
	}
}

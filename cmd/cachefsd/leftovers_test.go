//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNothingLeftBehind runs `local`, and `serve` with `mount`, each
// with the default state directory and its own TMPDIR, makes a
// delegated change, and stops the guest by SIGTERM or by umount: no
// socket directory, state directory, control socket or mount is left.
func TestNothingLeftBehind(t *testing.T) {
	requireFUSE(t)
	stops := map[string]func(t *testing.T, d *daemon, p paths){
		"signal": func(t *testing.T, d *daemon, p paths) { d.stop(t) },
		"umount": func(t *testing.T, d *daemon, p paths) {
			ctlOK(t, p.ctl, "flush") // else the journal rightly keeps the change
			if err := unix.Unmount(p.mnt, 0); err != nil {
				t.Fatalf("umount: %v", err)
			}
			if !d.wait(10 * time.Second) {
				t.Fatalf("%s still running 10s after its umount", d.name)
			}
		},
	}
	for name, stop := range stops {
		t.Run("local/"+name, func(t *testing.T) {
			p, tmp := newPaths(t), t.TempDir()
			d := startGuestTmp(t, p, tmp, "local", "--export", p.export)
			delegatedChange(t, p)
			stop(t, d, p)
			checkNothingLeft(t, p, tmp)
		})
		t.Run("mount/"+name, func(t *testing.T) {
			p, tmp := newPaths(t), t.TempDir()
			srv := startServe(t, p.export, p.sock, false)
			d := startGuestTmp(t, p, tmp, "mount", "--upstream", "unix://"+p.sock)
			delegatedChange(t, p)
			stop(t, d, p)
			checkNothingLeft(t, p, tmp)
			srv.stop(t)
			if _, err := os.Lstat(p.sock); err == nil {
				t.Errorf("serve stopped by SIGTERM left its socket %s", p.sock)
			}
		})
	}
}

// startGuestTmp starts a guest daemon in delegated mode with the
// default state directory and TMPDIR set to tmp.
func startGuestTmp(t *testing.T, p paths, tmp string, argv ...string) *daemon {
	t.Helper()
	t.Cleanup(func() { unix.Unmount(p.mnt, unix.MNT_DETACH) })
	t.Cleanup(func() { os.RemoveAll(stateDirFor(p.mnt)) })
	argv = append([]string{"env", "TMPDIR=" + tmp, cachefsdBin}, argv...)
	d := startDaemon(t, argv[3], append(argv, "--default-mode", "delegated", "--ctl", p.ctl, p.mnt)...)
	waitMounted(t, d, p.mnt, p.ctl)
	return d
}

// delegatedChange writes a file through the mount and checks that it
// reaches the host.
func delegatedChange(t *testing.T, p paths) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.mnt, "f"), []byte("guest"), 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	waitFor(t, 10*time.Second, "the change on the host", func() bool {
		b, _ := os.ReadFile(filepath.Join(p.export, "f"))
		return string(b) == "guest"
	})
}

// checkNothingLeft checks that a stopped guest of p with TMPDIR tmp
// left nothing behind.
func checkNothingLeft(t *testing.T, p paths, tmp string) {
	t.Helper()
	if isMounted(t, p.mnt) {
		t.Errorf("%s still mounted", p.mnt)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
	if _, err := os.Lstat(stateDirFor(p.mnt)); err == nil {
		t.Errorf("left the state directory %s", stateDirFor(p.mnt))
	}
	if _, err := os.Lstat(p.ctl); err == nil {
		t.Errorf("left the control socket %s", p.ctl)
	}
}

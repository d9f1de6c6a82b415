//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCtlRegisterPaths: a relative path is resolved against the ctl
// caller's working directory; a missing path, or one outside the mount,
// is an error with a non-zero exit.
func TestCtlRegisterPaths(t *testing.T) {
	p := newPaths(t)
	if err := os.Mkdir(filepath.Join(p.export, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	startGuest(t, "local", p.mnt, p.ctl, "local", "--export", p.export)
	rel := filepath.Join(filepath.Base(p.mnt), "sub")
	out, err := ctlIn(filepath.Dir(p.mnt), p.ctl, "register", "--mode", "cached", rel)
	if err != nil {
		t.Fatalf("ctl register %s from %s: %v\n%s", rel, filepath.Dir(p.mnt), err, out)
	}
	if id := strings.TrimSpace(out); !hasRegistration(ctlOK(t, p.ctl, "modes"), id) {
		t.Errorf("ctl register %s from the mountpoint's parent: modes lists no /sub for id %s:\n%s",
			rel, id, ctlOK(t, p.ctl, "modes"))
	}
	for _, c := range []struct{ dir, path, want string }{
		{p.mnt, "missing", "missing: no such file or directory"},
		{"/", filepath.Join(p.mnt, "missing"), "no such file or directory"},
		{t.TempDir(), ".", "is not under the mountpoint"},
	} {
		out, err := ctlIn(c.dir, p.ctl, "register", "--mode", "cached", c.path)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("ctl register %s in %s: err %v, output %q; want a non-zero exit saying %q", c.path, c.dir, err, out, c.want)
		}
	}
}

// ctlIn runs `cachefsd ctl --socket ctl ARGS...` in directory dir and
// returns its combined output.
func ctlIn(dir, ctl string, args ...string) (string, error) {
	cmd := exec.Command(cachefsdBin, append([]string{"ctl", "--socket", ctl}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

//go:build linux

package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestCtlBadInput: ctl says what is wrong before it dials: an unknown
// command (with the commands it knows), an unknown mode; and with no
// daemon on the socket, or a stale socket, that no daemon answers there.
func TestCtlBadInput(t *testing.T) {
	dir := t.TempDir()
	missing, stale := filepath.Join(dir, "missing.sock"), filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // a killed daemon's socket: nothing accepts on it
	for _, c := range []struct {
		sock string
		args []string
		want []string
	}{
		{missing, []string{"bogus"}, []string{`unknown ctl command "bogus"`, "  unregister ID"}},
		{missing, []string{"register", "--mode", "sloppy", dir}, []string{`"sloppy"`, "want consistent"}},
		{missing, []string{"stats"}, []string{"no guest daemon answers on " + missing, "--ctl"}},
		{stale, []string{"modes"}, []string{"no guest daemon answers on " + stale}},
	} {
		_, stderr, err := ctlRun(c.sock, c.args...)
		if err == nil {
			t.Errorf("ctl %s: exit status 0, want an error", strings.Join(c.args, " "))
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("ctl %s: stderr %q, want it to say %q", strings.Join(c.args, " "), stderr, w)
			}
		}
	}
}

//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cachefs/cachefs/cachefs"
)

// ctlRun runs `cachefsd ctl --socket ctl ARGS...`.
func ctlRun(ctl string, args ...string) (stdout, stderr string, err error) {
	argv := append([]string{cachefsdBin, "ctl", "--socket", ctl}, args...)
	return run(30*time.Second, argv...)
}

// ctlOK runs a ctl command that must succeed and returns its output.
func ctlOK(t *testing.T, ctl string, args ...string) string {
	t.Helper()
	out, stderr, err := ctlRun(ctl, args...)
	if err != nil {
		t.Fatalf("ctl %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// guestStats are a guest daemon's counters, as `ctl --json stats` gives
// them.
type guestStats struct{ *cachefs.Stats }

func ctlStats(t *testing.T, ctl string) guestStats {
	t.Helper()
	out := ctlOK(t, ctl, "--json", "stats")
	var resp cachefs.CtlResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("ctl --json stats: %v\n%s", err, out)
	}
	if resp.Stats == nil {
		t.Fatalf("ctl --json stats: no stats in %s", out)
	}
	return guestStats{resp.Stats}
}

// kernelCount returns how many FUSE requests of op the kernel sent.
func (s guestStats) kernelCount(op string) uint64 {
	for _, o := range s.Kernel {
		if o.Op == op {
			return o.Count
		}
	}
	return 0
}

var (
	kernelLineRe = regexp.MustCompile(`(?m)^main connection: .*kernel requests [1-9][0-9]*: .*getattr [1-9]`)
	cachedLineRe = regexp.MustCompile(`(?m)^cached connection .*kernel requests [1-9][0-9]*: `)
)

// hostReads counts the reads that went upstream, through a handle or
// by node.
func (s guestStats) hostReads() uint64 { return s.opCount("read") + s.opCount("readnode") }

// opCount returns how many requests of op (by name) went upstream.
func (s guestStats) opCount(op string) uint64 {
	for _, o := range s.Upstream.Ops {
		if o.Op == op {
			return o.Count
		}
	}
	return 0
}

var pingRe = regexp.MustCompile(`^round trip (\S+)\n$`)

// TestCtlCommands drives `cachefsd local` through every ctl command.
func TestCtlCommands(t *testing.T) {
	p := newPaths(t)
	if err := os.Mkdir(filepath.Join(p.export, "sub"), 0o755); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	startGuest(t, "local", p.mnt, p.ctl, "local", "--export", p.export)
	if out := ctlOK(t, p.ctl, "modes"); !strings.HasPrefix(out, "nothing registered") {
		t.Errorf("ctl modes with nothing registered: %q, want \"nothing registered...\"", out)
	}

	out := ctlOK(t, p.ctl, "ping")
	m := pingRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ctl ping: got %q, want \"round trip DURATION\"", out)
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d <= 0 {
		t.Errorf("ctl ping: round trip %q: %v", m[1], err)
	}

	sub := filepath.Join(p.mnt, "sub")
	id := strings.TrimSpace(ctlOK(t, p.ctl, "register", "--mode", "cached", sub))
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		t.Fatalf("ctl register: got %q, want an id", id)
	}
	if !hasRegistration(ctlOK(t, p.ctl, "modes"), id) {
		t.Errorf("ctl modes does not list registration %s", id)
	}
	if sent := ctlStats(t, p.ctl).Upstream.Sent; sent == 0 {
		t.Errorf("ctl stats: messages sent 0, want > 0 after a ping")
	}
	before := ctlStats(t, p.ctl).kernelCount("GETATTR")
	for i := 0; i < 3; i++ {
		if _, err := os.Stat(p.mnt); err != nil { // consistent: a GETATTR each
			t.Fatal(err)
		}
	}
	if got := ctlStats(t, p.ctl).kernelCount("GETATTR") - before; got < 3 {
		t.Errorf("ctl stats: %d kernel GETATTR requests counted for 3 stats of a consistent mount, want >= 3", got)
	}
	if out := ctlOK(t, p.ctl, "stats"); !kernelLineRe.MatchString(out) || !cachedLineRe.MatchString(out) {
		t.Errorf("ctl stats has no \"main connection: ... kernel requests N: getattr M, ...\" line, or no cached connection's after a cached registration:\n%s", out)
	}
	ctlOK(t, p.ctl, "unregister", id)
	if modes := ctlOK(t, p.ctl, "modes"); hasRegistration(modes, id) {
		t.Errorf("ctl modes lists registration %s after unregister:\n%s", id, modes)
	}
	checkCtlErrors(t, p.ctl, sub, id)
}

// hasRegistration reports whether `ctl modes` output lists id for /sub
// in cached mode.
func hasRegistration(modes, id string) bool {
	for _, line := range strings.Split(modes, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id && f[1] == "cached" && f[2] == "/sub" {
			return true
		}
	}
	return false
}

// checkCtlErrors asserts bad requests exit non-zero with a clear
// message.
func checkCtlErrors(t *testing.T, ctl, sub, goneID string) {
	t.Helper()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"register", "--mode", "bogus", sub}, `unknown consistency mode "bogus"`},
		{[]string{"register", "--mode", "cached", "/"}, "/ is not under the mountpoint"},
		{[]string{"unregister", goneID}, "no registration " + goneID},
		{[]string{"unregister", "x"}, `bad id "x"`},
	} {
		_, stderr, err := ctlRun(ctl, c.args...)
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("ctl %s: err %v, stderr %q; want a non-zero exit saying %q",
				strings.Join(c.args, " "), err, stderr, c.want)
		}
	}
}

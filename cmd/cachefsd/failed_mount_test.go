package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestFailedMountLeavesNoState: a mount that fails after it reached the
// host, on a flag checked late, leaves no state directory behind.
func TestFailedMountLeavesNoState(t *testing.T) {
	requireFUSE(t)
	p := newPaths(t)
	startServe(t, p.export, p.sock, false)
	t.Cleanup(func() { os.RemoveAll(stateDirFor(p.mnt)) })
	_, stderr, err := run(30*time.Second, cachefsdBin, "mount", "--upstream", "unix://"+p.sock, "--default-mode", "delegated",
		"--uring", "bogus", "--ctl", p.ctl, p.mnt)
	if err == nil || !strings.Contains(stderr, `--uring "bogus"`) {
		t.Errorf("mount --uring bogus: err %v, stderr %q; want a non-zero exit naming the flag", err, stderr)
	}
	if _, err := os.Lstat(stateDirFor(p.mnt)); err == nil {
		t.Errorf("the failed mount left its state directory %s", stateDirFor(p.mnt))
	}
	if isMounted(t, p.mnt) {
		t.Errorf("the failed mount left %s mounted", p.mnt)
	}
}

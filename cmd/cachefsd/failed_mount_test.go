//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestDeadMountReplaced: a mount whose daemon was killed (ENOTCONN to
// every access) is replaced by the next guest on the same mountpoint, as
// systemd's Restart= would start it.
func TestDeadMountReplaced(t *testing.T) {
	p := newPaths(t)
	if err := os.WriteFile(filepath.Join(p.export, "f"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	startServe(t, p.export, p.sock, false)
	t.Cleanup(func() { removeRunDir(stateDirFor(p.mnt)) })
	startMount(t, p.sock, p.mnt, p.ctl, "consistent").kill(t)
	waitFor(t, 10*time.Second, "ENOTCONN from the killed daemon's mountpoint", func() bool {
		_, err := os.Stat(p.mnt) // first ECANCELED or ECONNABORTED, while the kernel ends the connection
		return errors.Is(err, unix.ENOTCONN)
	})
	d := startDaemon(t, "mount", cachefsdBin, "mount", "--upstream", "unix://"+p.sock, "--ctl", p.ctl, p.mnt)
	waitDial(t, d, p.ctl) // the killed daemon's socket is still there
	if b, err := os.ReadFile(filepath.Join(p.mnt, "f")); err != nil || string(b) != "host" {
		t.Errorf("read through the new mount: %q, %v; want \"host\"", b, err)
	}
}

// removeRunDir detaches the connections a killed guest left in its
// state directory, and removes it.
func removeRunDir(state string) {
	conns, _ := filepath.Glob(filepath.Join(state, "conn", "*"))
	for _, c := range conns {
		unix.Unmount(c, unix.MNT_DETACH)
	}
	os.RemoveAll(state)
}

//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestReadOnlyExportMountedRO: the guest mounts a --read-only export
// read-only, as /proc/mounts shows, and a write fails with EROFS in the
// guest's kernel.
func TestReadOnlyExportMountedRO(t *testing.T) {
	p := newPaths(t)
	argv := []string{cachefsdBin, "serve", "--export", p.export, "--listen", "unix://" + p.sock, "--read-only"}
	d := startDaemon(t, "serve", argv...)
	waitListening(t, d, p.sock)
	startMount(t, p.sock, p.mnt, p.ctl, "consistent")
	if opts := mountOptions(t, p.mnt); !slices.Contains(opts, "ro") {
		t.Errorf("%s mounted with %v, want ro", p.mnt, opts)
	}
	err := os.WriteFile(filepath.Join(p.mnt, "f"), nil, 0o644)
	if pe, ok := err.(*os.PathError); !ok || pe.Err != syscall.EROFS {
		t.Errorf("create on the read-only mount: %v, want EROFS", err)
	}
}

// mountOptions returns the per-mount options of mnt in
// /proc/self/mountinfo.
func mountOptions(t *testing.T, mnt string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == mnt {
			return strings.Split(f[5], ",")
		}
	}
	t.Fatalf("%s not in /proc/self/mountinfo", mnt)
	return nil
}

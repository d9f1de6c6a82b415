//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListingSurvivesInvalidation reads a cached-mode directory too big
// for one prefetch (so its first open lists through the host and the
// kernel caches host offsets) and, halfway through a second read (served
// from the guest's cached listing), invalidates the kernel's caches by a
// registration: the read must still return every entry.
func TestListingSurvivesInvalidation(t *testing.T) {
	p := newPaths(t)
	const n = 20000
	dir := filepath.Join(p.export, "d")
	os.Mkdir(dir, 0o755)
	for i := 0; i < n; i++ {
		fd, err := unix.Open(filepath.Join(dir, fmt.Sprintf("e%05d", i)), unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		unix.Close(fd)
	}
	startGuest(t, "local", p.mnt, p.ctl, "local", "--export", p.export, "--default-mode", "cached")
	mdir := filepath.Join(p.mnt, "d")
	if ents, err := os.ReadDir(mdir); err != nil || len(ents) != n {
		t.Fatalf("first ReadDir: %d entries, %v; want %d", len(ents), err, n)
	}
	f, err := os.Open(mdir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()
	first, err := f.Readdirnames(100)
	if err != nil {
		t.Fatalf("Readdirnames: %v", err)
	}
	ctlOK(t, p.ctl, "register", "--mode", "cached", mdir)
	rest, err := f.Readdirnames(-1)
	if got := len(first) + len(rest); err != nil || got != n {
		t.Errorf("listing invalidated midway: %d entries, %v; want %d", got, err, n)
	}
}

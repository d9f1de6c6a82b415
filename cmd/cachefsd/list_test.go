//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// bigDirSize is how many entries TestListMillionFiles lists: a million
// with CACHEFS_LONG=1, else 200,000. Creating a million hard links takes
// ~30s here, but `ls -l` of them is two getxattr round trips an entry
// even in cached mode, minutes on CI's two shared cores.
func bigDirSize() int {
	if longRun() {
		return 1_000_000
	}
	return 200_000
}

// makeEntries fills dir with n names, hard links to a few empty files:
// linking is faster than creating inodes. ext4 allows 65,000 links to a
// file, so a new file starts every linksPerFile names.
func makeEntries(t *testing.T, dir string, n int) {
	t.Helper()
	const linksPerFile = 50_000
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer unix.Close(fd)
	var base string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("e%07d", i)
		if i%linksPerFile == 0 {
			base = name
			f, err := unix.Openat(fd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatalf("Openat: %v", err)
			}
			unix.Close(f)
			continue
		}
		if err := unix.Linkat(fd, base, fd, name, 0); err != nil {
			t.Fatalf("Linkat %s: %v", name, err)
		}
	}
}

// TestListMillionFiles lists a huge directory with `ls -l` through a
// mount of a server limited to 1024 open files. The mount caches
// metadata: in consistent mode every entry costs ~15 round trips (the
// kernel revalidates the path for each of ls's lstat and two getxattr
// calls), half an hour for a million.
func TestListMillionFiles(t *testing.T) {
	requireFUSE(t)
	p := newPaths(t)
	big := filepath.Join(p.export, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	n := bigDirSize()
	start := time.Now()
	makeEntries(t, big, n)
	t.Logf("created %d entries in %v", n, time.Since(start))

	srv := startServe(t, p.export, p.sock, true)
	guest := startMount(t, p.sock, p.mnt, p.ctl, "cached")
	fds := sampleFDs(srv.pid())
	start = time.Now()
	out, stderr, err := run(longTimeout(8*time.Minute, 40*time.Minute), "bash", "-c", `set -o pipefail; ls -l "$1" | wc -l`, "ls", filepath.Join(p.mnt, "big"))
	maxFDs, _ := fds.stop()
	t.Logf("ls -l | wc -l took %v; server fds max %d; mount daemon VmHWM %d kB, server VmHWM %d kB",
		time.Since(start), maxFDs, procField(t, guest.pid(), "status", "VmHWM:"), procField(t, srv.pid(), "status", "VmHWM:"))
	if err != nil || stderr != "" {
		t.Fatalf("ls -l: %v\n%s", err, tail(stderr, 2000))
	}
	if got, _ := strconv.Atoi(strings.TrimSpace(out)); got != n+1 {
		t.Errorf("ls -l | wc -l: got %q, want %d (entries and the total line)", out, n+1)
	}
	if maxFDs >= 1024 {
		t.Errorf("server fds: max %d, want under 1024", maxFDs)
	}
}

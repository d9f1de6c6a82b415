//go:build linux

package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	treeDepth  = 10 // directory levels below the root
	treeFanout = 2  // subdirectories of each directory above the leaves
)

// treeFiles is how many files TestWalkDeepTree walks in a mode: in
// cached mode exactly a million with CACHEFS_LONG=1, else 20,000. In
// consistent mode each lstat of a path 11 names deep revalidates every
// name, about 25 round trips an entry (550,000 for 22,000 entries, two
// minutes on CI's cores): 4,000 files, or 100,000 with CACHEFS_LONG=1
// (a million would take hours).
func treeFiles(mode string) int {
	switch {
	case mode == "cached" && longRun():
		return 1_000_000
	case mode == "cached":
		return 20_000
	case longRun():
		return 100_000
	}
	return 4_000
}

// treeDirs is how many directories the tree has below its root.
func treeDirs() int {
	n, level := 0, 1
	for d := 0; d < treeDepth; d++ {
		level *= treeFanout
		n += level
	}
	return n
}

// makeTree makes in root a tree treeDepth directories deep, fanning out
// treeFanout ways at each level, with files empty files spread evenly
// over the deepest directories.
func makeTree(t *testing.T, root string, files int) {
	t.Helper()
	leaves := []string{root}
	for d := 0; d < treeDepth; d++ {
		var next []string
		for _, dir := range leaves {
			for i := 0; i < treeFanout; i++ {
				sub := filepath.Join(dir, fmt.Sprintf("d%d", i))
				if err := os.Mkdir(sub, 0o755); err != nil {
					t.Fatalf("Mkdir: %v", err)
				}
				next = append(next, sub)
			}
		}
		leaves = next
	}
	for i, dir := range leaves {
		n := files / len(leaves)
		if i < files%len(leaves) {
			n++
		}
		makeFiles(t, dir, n)
	}
}

// makeFiles creates n empty files in dir.
func makeFiles(t *testing.T, dir string, n int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer unix.Close(fd)
	for i := 0; i < n; i++ {
		f, err := unix.Openat(fd, fmt.Sprintf("f%06d", i), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatalf("Openat: %v", err)
		}
		unix.Close(f)
	}
}

// walkCount walks root with filepath.WalkDir, lstat'ing every entry, and
// counts the directories (root excluded) and regular files.
func walkCount(root string) (dirs, files int, err error) {
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case p == root:
		case fi.IsDir():
			dirs++
		case fi.Mode().IsRegular():
			files++
		default:
			return fmt.Errorf("%s: unexpected %v", p, fi.Mode())
		}
		return nil
	})
	return dirs, files, err
}

// guestMemBound is the most resident memory, in kB, a guest daemon may
// reach walking a tree of n entries: 128 MiB for the runtime and the
// caches' working set, and 1 KiB per entry (the kernel holds an inode,
// and so the daemon a node, for each entry it has looked up). Measured:
// 40 MiB for 22,000 entries, 654 MiB for a million (cached mode).
func guestMemBound(n int) int {
	return 128<<10 + n
}

// TestWalkDeepTree walks a 10-level tree (2,046 directories and
// treeFiles files) with filepath.WalkDir and lstat through cached and
// consistent mounts of a server limited to 1024 open files: every
// directory and file is found without error, the server stays under its
// fd limit, and the guest daemon's peak resident memory stays within
// guestMemBound.
func TestWalkDeepTree(t *testing.T) {
	for _, mode := range []string{"cached", "consistent"} {
		t.Run(mode, func(t *testing.T) { testWalk(t, mode) })
	}
}

func testWalk(t *testing.T, mode string) {
	requireFUSE(t)
	p, files := newPaths(t), treeFiles(mode)
	start := time.Now()
	makeTree(t, p.export, files)
	t.Logf("made %d directories and %d files in %v", treeDirs(), files, time.Since(start))
	srv := startServe(t, p.export, p.sock, true)
	guest := startMount(t, p.sock, p.mnt, p.ctl, mode)
	fds := sampleFDs(srv.pid())
	start = time.Now()
	dirs, got, err := walkCount(p.mnt)
	maxFDs, _ := fds.stop()
	hwm := procField(t, guest.pid(), "status", "VmHWM:")
	st := ctlStats(t, p.ctl)
	t.Logf("%s: walked %d dirs, %d files in %v; server fds max %d; guest VmHWM %d kB (bound %d), %d nodes, %d messages",
		mode, dirs, got, time.Since(start), maxFDs, hwm, guestMemBound(files+dirs), st.Nodes, st.Upstream.Sent)
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
	if dirs != treeDirs() || got != files {
		t.Errorf("walk found %d directories and %d files, want %d and %d", dirs, got, treeDirs(), files)
	}
	if maxFDs >= 1024 {
		t.Errorf("server fds: max %d, want under 1024", maxFDs)
	}
	if hwm > guestMemBound(files+dirs) {
		t.Errorf("guest daemon VmHWM %d kB, want at most %d kB for %d entries", hwm, guestMemBound(files+dirs), files+dirs)
	}
}

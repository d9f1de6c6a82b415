//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Disk-full faults: the host's export or the guest's state directory on
// a small tmpfs. Applications must get ENOSPC (or EDQUOT), never a hang
// or an acknowledged write that is lost, and everything must work again
// once space is freed.

const (
	tmpfsSize = 8 << 20
	chunkSize = 256 << 10
	hangBound = 2 * time.Minute // an operation still blocked after this hangs
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory, unmounted
// when the test ends; it skips the test where mounting is not allowed.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Skipf("cannot mount a tmpfs for disk-full tests (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount tmpfs: %v", err)
		}
	})
	return dir
}

// within runs f and returns its error, failing the test if f is still
// blocked after hangBound.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- f() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(hangBound):
		t.Fatalf("%s: still blocked after %v", what, hangBound)
		return nil
	}
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// wantNoSpace fails the test unless err is ENOSPC or EDQUOT.
func wantNoSpace(t *testing.T, what string, err error) {
	t.Helper()
	if !isNoSpace(err) {
		t.Fatalf("%s: got %v, want ENOSPC or EDQUOT", what, err)
	}
}

// fillFile writes distinct chunks to a new file at path until a write
// fails (at most limit bytes), then closes it. It returns how many bytes
// the writes acknowledged and the first error of the writes or close.
func fillFile(path string, id, limit int) (int, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	data, done := pattern(id, limit), 0
	for done < limit && err == nil {
		var n int
		n, err = f.Write(data[done:min(done+chunkSize, limit)])
		done += n
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return done, err
}

// wantPrefix fails the test unless path starts with want.
func wantPrefix(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	if len(got) < len(want) || !bytes.Equal(got[:len(want)], want) {
		t.Errorf("%s: %d bytes, not starting with the %d acknowledged", path, len(got), len(want))
	}
}

// wantContent fails the test unless path holds want.
func wantContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("ReadFile: %v", err)
	} else if !bytes.Equal(got, want) {
		t.Errorf("%s: %d bytes, not the %d written", path, len(got), len(want))
	}
}

// TestHostDiskFull fills the host's export through consistent and cached
// mounts: writing past the space fails with ENOSPC, creating a file on
// the full host too, without hanging; the mount stays usable, data
// written before is intact, and once space is freed writes succeed.
func TestHostDiskFull(t *testing.T) {
	for _, mode := range []string{"consistent", "cached"} {
		t.Run(mode, func(t *testing.T) { testHostDiskFull(t, mode) })
	}
}

func testHostDiskFull(t *testing.T, mode string) {
	requireFUSE(t)
	p := newPaths(t)
	p.export = mountTmpfs(t, tmpfsSize)
	keep := pattern(1, 1<<20)
	if err := os.WriteFile(filepath.Join(p.export, "keep"), keep, 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	startServe(t, p.export, p.sock, false)
	startMount(t, p.sock, p.mnt, p.ctl, mode)
	wantContent(t, filepath.Join(p.mnt, "keep"), keep)

	var n int
	err := within(t, "writing past the space", func() (err error) {
		n, err = fillFile(filepath.Join(p.mnt, "big"), 2, 4*tmpfsSize)
		return err
	})
	t.Logf("%d bytes acknowledged before: %v", n, err)
	wantNoSpace(t, "writing past the space", err)
	err = within(t, "a new file on the full host", func() error {
		return os.WriteFile(filepath.Join(p.mnt, "small"), pattern(3, chunkSize), 0o644)
	})
	wantNoSpace(t, "a new file on the full host", err)

	wantContent(t, filepath.Join(p.mnt, "keep"), keep)
	wantContent(t, filepath.Join(p.export, "keep"), keep)
	wantPrefix(t, filepath.Join(p.mnt, "big"), pattern(2, n))
	wantPrefix(t, filepath.Join(p.export, "big"), pattern(2, n))

	if err := os.Remove(filepath.Join(p.mnt, "big")); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	after := pattern(4, 2<<20)
	// The kernel sends RELEASE after the last close without waiting for
	// it, so the host may still hold big open, and its space, after the
	// unlink; it frees the space once the RELEASE arrives.
	waitFor(t, 10*time.Second, "the host to free big's space", func() bool {
		return freeBytes(t, p.export) >= int64(len(after)+chunkSize)
	})
	if err := os.WriteFile(filepath.Join(p.mnt, "after"), after, 0o644); err != nil {
		t.Fatalf("WriteFile after freeing space: %v", err)
	}
	wantContent(t, filepath.Join(p.export, "after"), after)
	if ents, err := os.ReadDir(p.mnt); err != nil || len(ents) != 3 {
		t.Errorf("ReadDir: %d entries, %v; want keep, small and after", len(ents), err)
	}
}

// freeBytes returns the bytes free to users on dir's filesystem.
func freeBytes(t *testing.T, dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("Statfs: %v", err)
	}
	return int64(st.Bavail) * st.Bsize
}

// treeOf describes a tree: type, mode, size and content hash or link
// target of each entry by relative path.
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode %o", st.Mode)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" size %d sha256 %x", st.Size, sha256.Sum256(b))
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

// sameTree fails the test unless got and want describe the same tree.
func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s is %q, want %q", what, k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s", what, k)
		}
	}
}

// startDelegatedMount runs `cachefsd mount` in FUSE delegated mode
// (--overlay=false) with its journal in state.
func startDelegatedMount(t *testing.T, p paths, state string) *daemon {
	t.Helper()
	return startDelegated(t, p, state, false)
}

// startDelegated runs `cachefsd mount --default-mode delegated` with its
// state in state: its root an overlay, or FUSE delegated.
func startDelegated(t *testing.T, p paths, state string, overlay bool) *daemon {
	t.Helper()
	d := startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", "unix://"+p.sock,
		"--default-mode", "delegated", fmt.Sprintf("--overlay=%v", overlay), "--state-dir", state)
	if overlay && !isOverlayMount(t, p.mnt) {
		t.Fatalf("%s is not an overlay", p.mnt)
	}
	return d
}

// TestHostDiskFullDelegated writes a delegated tree bigger than the
// host's free space: the guest completes it, the write-back fails,
// `ctl flush` reports the path and errno and fails, the guest's data is
// kept (not dropped) and still reads whole; once space is freed on the
// host, a flush completes and the host tree equals the guest's. FUSE
// delegated (the journal) and the overlay (--default-mode delegated).
func TestHostDiskFullDelegated(t *testing.T) {
	for _, overlay := range []bool{false, true} {
		t.Run(implName(overlay), func(t *testing.T) { testHostDiskFullDelegated(t, overlay) })
	}
}

func implName(overlay bool) string {
	if overlay {
		return "overlay"
	}
	return "fuse"
}

func testHostDiskFullDelegated(t *testing.T, overlay bool) {
	requireFUSE(t)
	if overlay {
		requireOverlays(t)
	}
	p := newPaths(t)
	disk := mountTmpfs(t, tmpfsSize)
	p.export = filepath.Join(disk, "export")
	filler := filepath.Join(disk, "filler")
	if err := os.Mkdir(p.export, 0o755); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	if err := os.WriteFile(filler, pattern(9, 6<<20), 0o644); err != nil {
		t.Fatalf("WriteFile filler: %v", err)
	}
	startServe(t, p.export, p.sock, false)
	startDelegated(t, p, t.TempDir(), overlay)

	writeDelegatedTree(t, p.mnt)
	guest := treeOf(t, p.mnt)
	_, stderr, err := ctlRun(p.ctl, "flush")
	t.Logf("ctl flush with the host full: %v: %s", err, stderr)
	if err == nil {
		t.Fatalf("ctl flush succeeded with the host full")
	}
	full := "write d/b: " // the journal's order: d/a fits, d/b does not
	if overlay {
		full = "write " // an overlay's pass sends the files in an order of its own
	}
	if !strings.Contains(stderr, full) || !strings.Contains(stderr, syscall.ENOSPC.Error()) {
		t.Errorf("ctl flush: %q, want %q and %q", stderr, full, syscall.ENOSPC.Error())
	}
	if !overlay {
		checkFailureStats(t, p.ctl, "d/b")
	}
	sameTree(t, "guest after the failed flush", treeOf(t, p.mnt), guest)
	// fsync waits for the write-back too, and says why it cannot finish
	// (an overlay's is the guest disk's, which has room).
	if overlay {
	} else if f, err := os.OpenFile(filepath.Join(p.mnt, "c"), os.O_WRONLY, 0); err != nil {
		t.Errorf("open c: %v", err)
	} else {
		if err := f.Sync(); !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("fsync with the host full: %v, want ENOSPC", err)
		}
		f.Close()
	}

	if err := os.Remove(filler); err != nil {
		t.Fatalf("Remove filler: %v", err)
	}
	if out, stderr, err := ctlRun(p.ctl, "flush"); err != nil {
		t.Fatalf("ctl flush after freeing space: %v: %s%s", err, out, stderr)
	}
	sameTree(t, "host after the flush", treeOf(t, p.export), guest)
	sameTree(t, "guest after the flush", treeOf(t, p.mnt), guest)
}

// writeDelegatedTree makes, through a delegated mount, a tree of 5 MiB
// of data: d/a (1 MiB), d/b (3 MiB, which does not fit beside a), c,
// a symlink and a renamed file.
func writeDelegatedTree(t *testing.T, mnt string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	for _, f := range []struct {
		name     string
		id, size int
	}{{"d/a", 10, 1 << 20}, {"d/b", 11, 3 << 20}, {"c", 12, 1 << 20}, {"d/tmp", 13, 1000}} {
		if err := os.WriteFile(filepath.Join(mnt, f.name), pattern(f.id, f.size), 0o644); err != nil {
			t.Fatalf("WriteFile %s: %v", f.name, err)
		}
	}
	if err := os.Symlink("d/a", filepath.Join(mnt, "link")); err != nil {
		t.Fatalf("Symlink: %v", err)
	}
	if err := os.Rename(filepath.Join(mnt, "d/tmp"), filepath.Join(mnt, "renamed")); err != nil {
		t.Fatalf("Rename: %v", err)
	}
}

// checkFailureStats asserts `ctl stats` lists a write-back failure of
// path with ENOSPC.
func checkFailureStats(t *testing.T, ctl, path string) {
	t.Helper()
	wb := ctlStats(t, ctl).Writeback
	for _, f := range wb.Failures {
		if f.Path == path && f.Errno == syscall.ENOSPC.Error() {
			return
		}
	}
	t.Errorf("ctl stats: write-back failures %+v, want %s with ENOSPC", wb.Failures, path)
}

// TestGuestDiskFullDelegated fills the tmpfs holding a delegated mount's
// state directory, with the host server stopped so nothing drains: each
// change then either fails with ENOSPC or, if acknowledged, survives a
// SIGKILL of the guest daemon (its journal is replayed by the next one).
// After space is freed the mount works and the host equals the guest.
// FUSE delegated (the journal fills) and the overlay (its upper
// directory fills; the next daemon writes the dead one's back).
func TestGuestDiskFullDelegated(t *testing.T) {
	for _, overlay := range []bool{false, true} {
		t.Run(implName(overlay), func(t *testing.T) { testGuestDiskFullDelegated(t, overlay) })
	}
}

func testGuestDiskFullDelegated(t *testing.T, overlay bool) {
	requireFUSE(t)
	if overlay {
		requireOverlays(t)
	}
	p := newPaths(t)
	disk := mountTmpfs(t, tmpfsSize)
	state := filepath.Join(disk, "state")
	srv := startServe(t, p.export, p.sock, false)
	guest := startDelegated(t, p, state, overlay)
	// The directories are owned by the guest from here: changes in them
	// need no host.
	if err := os.Mkdir(filepath.Join(p.mnt, "d"), 0o755); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	warm := pattern(20, 1000)
	if err := os.WriteFile(filepath.Join(p.mnt, "d", "warm"), warm, 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	ctlOK(t, p.ctl, "flush")
	filler := fillDisk(t, disk)

	srv.cmd.Process.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { srv.cmd.Process.Signal(syscall.SIGCONT) })
	acked := changeFullGuest(t, p.mnt, !overlay)
	guest.kill(t)
	unix.Unmount(p.mnt, unix.MNT_DETACH)
	os.Remove(p.ctl) // the killed daemon's: wait for the next one's
	srv.cmd.Process.Signal(syscall.SIGCONT)
	if err := os.Remove(filler); err != nil {
		t.Fatalf("Remove filler: %v", err)
	}

	startDelegated(t, p, state, overlay) // replays the journal, or writes the upper directory back
	host := treeOf(t, p.export)
	for path, want := range acked {
		if host[path] != want {
			t.Errorf("acknowledged change lost: host has %s as %q, want %q", path, host[path], want)
		}
	}
	after := pattern(21, 2<<20)
	if err := os.WriteFile(filepath.Join(p.mnt, "after"), after, 0o644); err != nil {
		t.Fatalf("WriteFile after freeing space: %v", err)
	}
	ctlOK(t, p.ctl, "flush")
	sameTree(t, "host after freeing space", treeOf(t, p.export), treeOf(t, p.mnt))
}

// fillDisk writes a file on dir until the filesystem is full and returns
// its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	_, err := fillFile(p, 99, 4*tmpfsSize)
	wantNoSpace(t, "filling the disk", err)
	return p
}

// changeFullGuest makes changes through a delegated mount whose state
// directory is full. Each must succeed or fail with ENOSPC; it returns
// how the host must show the acknowledged ones (treeOf descriptions),
// "" for a name that must be gone. With journal, directories are made
// until the journal has no room (an overlay's mkdir takes no blocks of
// a tmpfs: its directories are on the guest's disk, and kept, once made).
func changeFullGuest(t *testing.T, mnt string, journal bool) map[string]string {
	t.Helper()
	acked := map[string]string{}
	d := filepath.Join(mnt, "d")
	_, err := fillFile(filepath.Join(d, "big"), 22, 4*tmpfsSize)
	wantNoSpace(t, "writing a file whose contents cannot be staged", err)

	small := pattern(23, 100)
	steps := []struct {
		what string
		do   func() error
		path string
		want string
	}{
		{"mkdir", func() error { return os.Mkdir(filepath.Join(d, "sub"), 0o755) }, "d/sub", "mode 40755"},
		{"create", func() error { return os.WriteFile(filepath.Join(d, "small"), small, 0o644) }, "d/small",
			fmt.Sprintf("mode 100644 size 100 sha256 %x", sha256.Sum256(small))},
		{"symlink", func() error { return os.Symlink("warm", filepath.Join(d, "link")) }, "d/link", "mode 120777 -> warm"},
		{"rename", func() error { return os.Rename(filepath.Join(d, "warm"), filepath.Join(d, "warm2")) }, "d/warm", ""},
	}
	for _, s := range steps {
		err := within(t, s.what+" on a full state directory", s.do)
		t.Logf("%s with the state directory full: %v", s.what, err)
		switch {
		case err == nil:
			acked[s.path] = s.want
		case !isNoSpace(err):
			t.Errorf("%s with the state directory full: got %v, want success or ENOSPC", s.what, err)
		}
	}
	if journal {
		mkdirUntilFull(t, d, acked)
	}
	return acked
}

// mkdirUntilFull makes directories in d until the journal has no room
// left for their records, which must end in ENOSPC, not in acknowledged
// changes kept only in memory.
func mkdirUntilFull(t *testing.T, d string, acked map[string]string) {
	t.Helper()
	const most = 5000 // records of 100 bytes: 500 KB of journal
	var err error
	made := 0
	for ; made < most; made++ {
		name := fmt.Sprintf("m%04d", made)
		if err = within(t, "mkdir", func() error { return os.Mkdir(filepath.Join(d, name), 0o755) }); err != nil {
			break
		}
		acked["d/"+name] = "mode 40755"
	}
	t.Logf("%d directories made before: %v", made, err)
	wantNoSpace(t, "mkdir with the journal full", err)
}

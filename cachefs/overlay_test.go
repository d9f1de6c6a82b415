package cachefs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"golang.org/x/sys/unix"
)

// overlayEnv starts a mount with overlays on, over export, and
// registers sub delegated. Cached names and attributes expire at once
// (CacheTTL 1ns), as they would after the TTL: every use of an overlay's
// lower dentry revalidates it with a LOOKUP that reaches the host.
func overlayEnv(t *testing.T, export, state, sub string) *harness.Env {
	t.Helper()
	env := startOverlayEnv(t, export, state, false, sub)
	if !isOverlay(t, filepath.Join(env.Mountpoint, sub)) {
		t.Fatalf("%s is not an overlay mount", sub)
	}
	return env
}

// overlayEnvHeld is overlayEnv with the write-back held until a flush.
func overlayEnvHeld(t *testing.T, export, state, sub string) *harness.Env {
	t.Helper()
	return startOverlayEnv(t, export, state, true, sub)
}

func startOverlayEnv(t *testing.T, export, state string, held bool, sub string) *harness.Env {
	t.Helper()
	requireOverlays(t)
	env := harness.Start(t, harness.Options{Export: export, StateDir: state, CacheTTL: time.Nanosecond,
		FS: cachefs.Options{Overlays: true}})
	if held {
		env.FS.HoldOverlays()
	}
	env.FS.Register(sub, consistency.Delegated)
	return env
}

// isOverlay reports whether dir is an overlay's root.
func isOverlay(t *testing.T, dir string) bool {
	var st unixStatfs
	if err := statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return st.Type == overlayMagic
}

// flushAll writes everything back and fails the test on failures.
func flushAll(t *testing.T, env *harness.Env) {
	t.Helper()
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
}

func readWant(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil || string(b) != want {
		t.Errorf("read %s: %q, %v; want %q", p, b, err, want)
	}
}

// TestOverlayRenamedLowerDirectory renames a lower directory with files
// in a delegated overlay subtree and writes it back: the host renames
// it, and the files inside still read through the overlay (no ESTALE
// from its lower dentries, which the host no longer has under their
// old name), also after the kernel was told to drop every name, and
// after the daemon restarted.
func TestOverlayRenamedLowerDirectory(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	writeTree(t, export, map[string]string{"sub/d1/f": "f", "sub/d1/inner/g": "g", "sub/file": "file", "elsewhere/x": ""})
	env := overlayEnv(t, export, state, "sub")
	mnt := filepath.Join(env.Mountpoint, "sub")
	readWant(t, filepath.Join(mnt, "d1/f"), "f")
	readWant(t, filepath.Join(mnt, "d1/inner/g"), "g")
	if err := os.Rename(filepath.Join(mnt, "d1"), filepath.Join(mnt, "d2")); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if err := os.Rename(filepath.Join(mnt, "file"), filepath.Join(mnt, "d2/file2")); err != nil {
		t.Fatalf("rename: %v", err)
	}
	flushAll(t, env)
	readWant(t, filepath.Join(export, "sub/d2/f"), "f")
	readWant(t, filepath.Join(export, "sub/d2/file2"), "file")
	if _, err := os.Stat(filepath.Join(export, "sub/d1")); !os.IsNotExist(err) {
		t.Errorf("host sub/d1 after the rename: %v", err)
	}
	readWant(t, filepath.Join(mnt, "d2/f"), "f")
	readWant(t, filepath.Join(mnt, "d2/inner/g"), "g")
	readWant(t, filepath.Join(mnt, "d2/file2"), "file")
	env.FS.Register("elsewhere", consistency.Cached) // drops every name the kernel caches
	if !isOverlay(t, mnt) {
		t.Fatalf("the overlay went when the kernel was told to drop the names above it")
	}
	readWant(t, filepath.Join(mnt, "d2/f"), "f")
	readWant(t, filepath.Join(mnt, "d2/inner/g"), "g")
	readWant(t, filepath.Join(mnt, "d2/file2"), "file")
	if err := env.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	env = overlayEnv(t, export, state, "sub")
	mnt = filepath.Join(env.Mountpoint, "sub")
	readWant(t, filepath.Join(mnt, "d2/f"), "f")
	readWant(t, filepath.Join(mnt, "d2/inner/g"), "g")
}

// writeTree makes files under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hostTree is the tree the mixed-changes test starts from.
var hostTree = map[string]string{
	"sub/a.txt": "a", "sub/b.txt": "b", "sub/big": strings.Repeat("0123456789", 100000),
	"sub/dA/x": "x", "sub/dA/y": "y", "sub/dA/sub/z": "z", "sub/dB/p": "p", "sub/dC/q": "q", "sub/dC/deep/r": "r",
	"sub/h1": "hard", "sub/own": "own", "sub/times": "times", "sub/xat": "xat", "sub/keep": "keep",
}

// mixedChanges makes, through the overlay at mnt, creates, overwrites,
// renames of files and directories (of host files not copied up too),
// unlinks, rmdir of host directories, chmod, chown, utimes, symlinks,
// hard links, xattrs and a fifo.
func mixedChanges(t *testing.T, mnt string) {
	t.Helper()
	p := func(rel string) string { return filepath.Join(mnt, rel) }
	steps := []func() error{
		func() error { return os.WriteFile(p("n1"), []byte("new one"), 0o640) },
		func() error { return os.MkdirAll(p("nd/deeper"), 0o750) },
		func() error { return os.WriteFile(p("nd/nf"), []byte("nf"), 0o644) },
		func() error { return os.WriteFile(p("a.txt"), []byte("overwritten"), 0o644) },
		func() error { return appendFile(p("big"), "tail") },
		func() error { return os.Rename(p("b.txt"), p("b2.txt")) },
		func() error { return os.Rename(p("dA"), p("dA2")) },
		func() error { return os.Rename(p("dA2/x"), p("dB/x2")) },
		func() error { return os.Rename(p("n1"), p("nd/n1moved")) },
		func() error { return os.Remove(p("dB/p")) },
		func() error { return os.RemoveAll(p("dC")) },
		func() error { return os.Chmod(p("dA2/y"), 0o600) },
		func() error { return os.Lchown(p("own"), 1234, 5678) },
		func() error { return unix.UtimesNano(p("times"), []unix.Timespec{{Sec: 1e9}, {Sec: 1e9, Nsec: 5}}) },
		func() error { return os.Symlink("nd/nf", p("nl")) },
		func() error { return os.WriteFile(p("n2"), []byte("n2"), 0o644) },
		func() error { return os.Link(p("n2"), p("nd/n2link")) },
		func() error { return os.Link(p("h1"), p("h3")) },
		func() error { return unix.Lsetxattr(p("xat"), "user.new", []byte("v"), 0) },
		func() error { return unix.Lsetxattr(p("nd/nf"), "user.nf", []byte("w"), 0) },
		func() error { return unix.Mkfifo(p("fifo"), 0o600) },
		func() error { return os.Chmod(p("dB"), 0o711) },
		func() error { return os.Rename(p("keep"), p("dA2/sub/keep")) },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

func appendFile(p, s string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// TestOverlayWriteBackMix makes a mix of changes in a delegated overlay
// subtree, flushes, and compares the host's tree with the guest's.
func TestOverlayWriteBackMix(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	writeTree(t, export, hostTree)
	unix.Lsetxattr(filepath.Join(export, "sub/xat"), "user.old", []byte("1"), 0)
	env := overlayEnv(t, export, state, "sub")
	mnt := filepath.Join(env.Mountpoint, "sub")
	unix.Lremovexattr(filepath.Join(mnt, "xat"), "user.old")
	mixedChanges(t, mnt)
	flushAll(t, env)
	compareTrees(t, "host after flush", fullTree(t, filepath.Join(export, "sub")), fullTree(t, mnt))
}

// TestOverlayKilledDaemon makes the mixed changes with write-back held,
// then leaves the overlay as a killed daemon would (unmounted, nothing
// flushed): a new daemon on the same state directory writes the upper
// directory back, and the host's tree is the guest's.
func TestOverlayKilledDaemon(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	writeTree(t, export, hostTree)
	env := overlayEnvHeld(t, export, state, "sub")
	mnt := filepath.Join(env.Mountpoint, "sub")
	mixedChanges(t, mnt)
	guest := fullTree(t, mnt)
	env.FS.AbandonOverlays()
	env.Close()
	if _, err := os.Stat(filepath.Join(export, "sub/n2")); err == nil {
		t.Fatalf("the host has sub/n2 before the restart: write-back was not held")
	}
	env = harness.Start(t, harness.Options{Export: export, StateDir: state, FS: cachefs.Options{Overlays: true}})
	compareTrees(t, "host after the restart", fullTree(t, filepath.Join(export, "sub")), guest)
	if left, _ := os.ReadDir(filepath.Join(state, "overlay")); len(left) != 0 {
		t.Errorf("state directory keeps %v after the recovery", left)
	}
}

// requireOverlays skips a test that mounts overlays where it cannot.
func requireOverlays(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("overlays need root")
	}
}

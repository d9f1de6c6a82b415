package cachefs_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/internal/posixtest"
	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// startDelegated mounts export delegated, with its state in stateDir.
func startDelegated(t *testing.T, export, stateDir string) *harness.Env {
	t.Helper()
	return harness.Start(t, harness.Options{Export: export, StateDir: stateDir,
		Policy: consistency.NewPolicy(consistency.Delegated), CacheTTL: time.Hour})
}

// buildTree makes a small tree the way an untar does: directories,
// files written in small pieces, a symlink, modes and times set last.
func buildTree(t *testing.T, root string) {
	t.Helper()
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for d := 0; d < 3; d++ {
		dir := filepath.Join(root, fmt.Sprintf("dir%d", d), "sub")
		if err := os.MkdirAll(dir, 0755); err != nil {
			t.Fatal(err)
		}
		for f := 0; f < 10; f++ {
			p := filepath.Join(dir, fmt.Sprintf("file%d.c", f))
			fh, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0644)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 20; i++ {
				fmt.Fprintf(fh, "line %d of %s\n", i, p)
			}
			fh.Close()
			os.Chmod(p, 0640)
			os.Chtimes(p, mtime, mtime)
		}
	}
	os.Symlink("dir0/sub/file1.c", filepath.Join(root, "link"))
	os.Rename(filepath.Join(root, "dir2", "sub", "file9.c"), filepath.Join(root, "dir1", "moved.c"))
	os.Remove(filepath.Join(root, "dir2", "sub", "file8.c"))
	os.WriteFile(filepath.Join(root, "dir0", "empty"), nil, 0600)
}

// snapshotTree describes a tree: type, mode, size, mtime, content or
// link target of every entry.
func snapshotTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatalf("walk %s: %v", p, err)
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		unix.Lstat(p, &st)
		desc := fmt.Sprintf("mode %o", st.Mode)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, _ := os.ReadFile(p)
			desc += fmt.Sprintf(" size %d mtime %d %q", st.Size, st.Mtim.Sec, b)
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		out[rel] = desc
		return nil
	})
	return out
}

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

func TestDelegatedCompletesInGuestAndWritesBack(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	env.FS.HoldWriteback(true)
	before := requests(env)
	buildTree(t, env.Mountpoint)
	guest := snapshotTree(t, env.Mountpoint)
	sent := requests(env) - before
	t.Logf("tree of %d entries built with %d upstream requests", len(guest), sent)
	if sent > 10 {
		t.Errorf("building a delegated tree sent %d upstream requests, want the guest to complete it", sent)
	}
	if ents, _ := os.ReadDir(export); len(ents) != 0 {
		t.Errorf("host has %d entries while write-back is held, want none yet", len(ents))
	}
	env.FS.HoldWriteback(false)
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
	sameTree(t, "host after flush", snapshotTree(t, export), guest)
	st := env.FS.Stats().Writeback
	if st.Batches == 0 || st.Batches*20 > st.Sent {
		t.Errorf("write-back stats %+v: want many changes per batch", st)
	}
}

func TestDelegatedSurvivesDaemonCrash(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	env1 := startDelegated(t, export, state)
	env1.FS.HoldWriteback(true)
	buildTree(t, env1.Mountpoint)
	want := snapshotTree(t, env1.Mountpoint)
	f, err := os.OpenFile(filepath.Join(env1.Mountpoint, "synced"), os.O_CREATE|os.O_WRONLY, 0644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("fsynced data"))
	// fsync waits for the host; with write-back held, do it from the
	// side and let the crash come first.
	go f.Sync()
	time.Sleep(50 * time.Millisecond)
	// The daemon dies: nothing more is sent; its journal stays.
	env1.FS.Crash()
	env1.Close()
	if ents, _ := os.ReadDir(export); len(ents) != 0 {
		t.Fatalf("host has %d entries before the restart", len(ents))
	}
	env2 := startDelegated(t, export, state) // replays the journal before mounting
	got := snapshotTree(t, export)
	want["synced"] = got["synced"]
	sameTree(t, "host after restart", got, want)
	if b, _ := os.ReadFile(filepath.Join(export, "synced")); string(b) != "fsynced data" {
		t.Errorf("fsynced file on the host: %q", b)
	}
	_ = env2
}

func TestDelegatedSurvivesServerRestart(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	env.FS.HoldWriteback(true)
	buildTree(t, env.Mountpoint)
	want := snapshotTree(t, env.Mountpoint)
	env.Listener.Close()
	env.Server.Close()
	srv, err := upstream.NewServer(upstream.ServerOptions{Export: export, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	env.FS.HoldWriteback(false)
	time.Sleep(50 * time.Millisecond) // the flusher meets the dead link
	l, err := upstream.Listen("unix://" + env.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go srv.Serve(l)
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("failures: %+v", failed)
	}
	sameTree(t, "host after server restart", snapshotTree(t, export), want)
}

func TestDelegatedConflictGuestWins(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("host"), 0644)
	env := startDelegated(t, export, t.TempDir())
	env.FS.Register("", consistency.Delegated) // watched: host events arrive
	env.FS.HoldWriteback(true)
	p := filepath.Join(env.Mountpoint, "f")
	if err := os.WriteFile(p, []byte("guest wins"), 0644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(export, "f"), []byte("host changed it"), 0644)
	os.WriteFile(filepath.Join(export, "g"), nil, 0644)
	eventually(t, "conflict counted", func() bool { return env.FS.Stats().Writeback.Conflicts > 0 })
	if b, _ := os.ReadFile(p); string(b) != "guest wins" {
		t.Errorf("guest reads %q during the conflict, want its own data", b)
	}
	env.FS.HoldWriteback(false)
	env.FS.WriteBack()
	if b, _ := os.ReadFile(filepath.Join(export, "f")); string(b) != "guest wins" {
		t.Errorf("host has %q after write-back, want the guest's data", b)
	}
}

func TestDelegatedFailureReported(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	env.FS.HoldWriteback(true)
	if err := os.Mkdir(filepath.Join(env.Mountpoint, "x"), 0755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(export, "x"), []byte("a file on the host"), 0644)
	env.FS.HoldWriteback(false)
	failed := env.FS.WriteBack()
	if len(failed) != 1 || failed[0].Path != "x" || failed[0].Op != "mkdir" {
		t.Fatalf("failures %+v, want the mkdir of x", failed)
	}
	if b, _ := os.ReadFile(filepath.Join(export, "x")); !bytes.Equal(b, []byte("a file on the host")) {
		t.Errorf("host file changed by a failed write-back: %q", b)
	}
}

// TestDelegatedUnlinkedOpenFile truncates and writes a guest-made file
// that is open but unlinked after a rename elsewhere in the mount (which
// makes nodes look up their mode again, and an unlinked one has no path
// to look it up by): the guest still serves it.
func TestDelegatedUnlinkedOpenFile(t *testing.T) {
	env := startDelegated(t, t.TempDir(), t.TempDir())
	p := filepath.Join(env.Mountpoint, "f")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0644)
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	other := filepath.Join(env.Mountpoint, "a")
	if err := os.WriteFile(other, nil, 0644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if err := os.Rename(other, other+"2"); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	if err := f.Truncate(2); err != nil {
		t.Fatalf("Ftruncate of the unlinked file: %v", err)
	}
	if _, err := f.WriteAt([]byte("y"), 2); err != nil {
		t.Fatalf("WriteAt: %v", err)
	}
	got := make([]byte, 16)
	n, _ := f.ReadAt(got, 0)
	if string(got[:n]) != "hey" {
		t.Errorf("unlinked file reads %q, want %q", got[:n], "hey")
	}
}

// TestDelegatedAttrsAfterWriteBack stats a host file (caching its host
// attributes), rewrites it in the guest and writes it back: once the
// guest's copy is dropped, a stat that goes to the daemon shows the
// written size, not the attributes cached before.
func TestDelegatedAttrsAfterWriteBack(t *testing.T) {
	env := startDelegated(t, t.TempDir(), t.TempDir())
	p := filepath.Join(env.Mountpoint, "f")
	if err := os.WriteFile(p, nil, 0644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_STATX_FORCE_SYNC, unix.STATX_SIZE, &stx); err != nil {
		t.Fatalf("Statx: %v", err)
	}
	if err := os.WriteFile(p, []byte("hello"), 0644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_STATX_FORCE_SYNC, unix.STATX_SIZE, &stx); err != nil {
		t.Fatalf("Statx: %v", err)
	}
	if stx.Size != 5 {
		t.Errorf("size after write-back: got %d, want 5", stx.Size)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "hello" {
		t.Errorf("ReadFile: %q, %v; want hello", b, err)
	}
}

// TestDelegatedWriteBackMatches runs conformance tests that change
// files' sizes and names in a delegated subtree, each in a directory of
// its own, then writes back: the host has what the guest shows, in size,
// content and mode.
func TestDelegatedWriteBackMatches(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	for _, name := range []string{"OpenTruncAfterStat", "TruncateThenPwrite", "TruncateThenAppend",
		"TruncateShrinkStays", "RenameOpenThenWrite"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(env.Mountpoint, name)
			if err := os.Mkdir(dir, 0755); err != nil {
				t.Fatalf("Mkdir: %v", err)
			}
			posixtest.All[name](t, dir)
			guest := snapshotTree(t, dir)
			if failed := env.FS.WriteBack(); len(failed) > 0 {
				t.Fatalf("write-back failures: %+v", failed)
			}
			sameTree(t, "host after flush", snapshotTree(t, filepath.Join(export, name)), guest)
		})
	}
}

// TestDelegatedRootSetattr changes the mount root's mode and times in a
// delegated mount (touch, chmod, as cp -a does to its target): the host's
// root gets them at the next flush, and later flushes succeed.
func TestDelegatedRootSetattr(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	mtime := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := os.Chmod(env.Mountpoint, 0751); err != nil {
		t.Fatalf("Chmod: %v", err)
	}
	if err := os.Chtimes(env.Mountpoint, mtime, mtime); err != nil {
		t.Fatalf("Chtimes: %v", err)
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Errorf("write-back failures: %+v", failed)
	}
	for i := 0; i < 2; i++ {
		if err := os.WriteFile(filepath.Join(env.Mountpoint, fmt.Sprint("f", i)), []byte("x"), 0644); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		if failed := env.FS.WriteBack(); len(failed) > 0 {
			t.Errorf("write-back failures after a later change: %+v", failed)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(export, &st); err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if st.Mode&07777 != 0751 {
		t.Errorf("host root mode %o, want 751", st.Mode&07777)
	}
	if err := os.Chtimes(env.Mountpoint, mtime, mtime); err != nil {
		t.Fatalf("Chtimes: %v", err)
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Errorf("write-back failures: %+v", failed)
	}
	if err := unix.Stat(export, &st); err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if got := time.Unix(st.Mtim.Unix()); !got.Equal(mtime) {
		t.Errorf("host root mtime %v, want %v", got, mtime)
	}
}

// TestDelegatedFlushKeepsFailures makes a change the host refuses (a
// directory where the host has a file), lets an fsync of another file
// see the failure first, then flushes: every flush reports the change
// with its path and errno for as long as it is not on the host, and
// once a later change at that path is, flush succeeds again.
func TestDelegatedFlushKeepsFailures(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	env.FS.HoldWriteback(true)
	x := filepath.Join(env.Mountpoint, "x")
	if err := os.Mkdir(x, 0755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(export, "x"), []byte("a file on the host"), 0644)
	env.FS.HoldWriteback(false)
	f, err := os.Create(filepath.Join(env.Mountpoint, "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err == nil {
		t.Errorf("fsync succeeded while a change failed to write back")
	}
	for i := 0; i < 2; i++ {
		failed := env.FS.WriteBack()
		if len(failed) != 1 || failed[0].Path != "x" || failed[0].Op != "mkdir" || failed[0].Errno == "" {
			t.Errorf("flush %d: failures %+v, want the mkdir of x", i, failed)
		}
	}
	os.Remove(filepath.Join(export, "x"))
	if err := os.Chmod(x, 0700); err != nil { // written back as a setattr of x: fails, no directory there
		t.Fatal(err)
	}
	if failed := env.FS.WriteBack(); len(failed) == 0 {
		t.Errorf("flush succeeded while x is not on the host")
	}
	if err := os.Rename(x, x+"2"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(x, 0755); err != nil {
		t.Fatal(err)
	}
	if failed := env.FS.WriteBack(); len(failed) != 1 || failed[0].Op != "rename" {
		// x is on the host now; x2 is still not (its rename found nothing)
		t.Errorf("failures %+v, want x2's rename only", failed)
	}
}

package cachefs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// readClose opens name read-only, reads it whole and closes it.
func readClose(t *testing.T, name string) {
	t.Helper()
	if _, err := os.ReadFile(name); err != nil {
		t.Fatal(err)
	}
}

// A read-only open where data may be cached closes without a FLUSH
// request (FOPEN_NOFLUSH); in consistent mode every close sends one.
func TestReadOnlyCloseSendsNoFlush(t *testing.T) {
	for _, tc := range []struct {
		mode    consistency.Mode
		flushes int
	}{{consistency.Cached, 0}, {consistency.Delegated, 0}, {consistency.Consistent, 10}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			export := t.TempDir()
			if err := os.WriteFile(filepath.Join(export, "f"), []byte("data"), 0644); err != nil {
				t.Fatal(err)
			}
			env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(tc.mode),
				StateDir: t.TempDir()})
			f := filepath.Join(env.Mountpoint, "f")
			readClose(t, f)
			env.Kernel.Reset()
			for i := 0; i < 10; i++ {
				readClose(t, f)
			}
			if got := env.Kernel.Count("FLUSH"); got != tc.flushes {
				t.Errorf("10 read-only opens and closes sent %d FLUSH, want %d", got, tc.flushes)
			}
			if got := env.Kernel.Count("OPEN"); got != 10 {
				t.Errorf("10 opens sent %d OPEN, want 10", got)
			}
		})
	}
}

// A POSIX lock taken through an open without FLUSH still ends when the
// file is closed: the host drops it with the handle.
func TestNoFlushOpenLockEndsAtClose(t *testing.T) {
	export := t.TempDir()
	hostFile := filepath.Join(export, "f")
	if err := os.WriteFile(hostFile, []byte("data"), 0644); err != nil {
		t.Fatal(err)
	}
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	fd, err := unix.Open(filepath.Join(env.Mountpoint, "f"), unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	rd := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &rd); err != nil {
		t.Fatal(err)
	}
	host, err := unix.Open(hostFile, unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(host)
	wr := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	if err := unix.FcntlFlock(uintptr(host), unix.F_OFD_SETLK, &wr); err == nil {
		t.Fatal("the host took a write lock over the guest's read lock")
	}
	unix.Close(fd)
	// RELEASE follows close(2) asynchronously.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := unix.FcntlFlock(uintptr(host), unix.F_OFD_SETLK, &wr)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guest's lock outlived its only descriptor: host write lock: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Opens of a cached directory share one listing; a change made while a
// handle reads it shows to the next open and leaves the reading handle
// its whole old listing.
func TestCachedListingChangesUnderOpenHandle(t *testing.T) {
	export := t.TempDir()
	var want []string
	for _, n := range []string{"a", "b", "c", "d"} {
		if err := os.WriteFile(filepath.Join(export, n), nil, 0644); err != nil {
			t.Fatal(err)
		}
		want = append(want, n)
	}
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	dir := env.Mountpoint
	if _, err := os.ReadDir(dir); err != nil { // cache the listing
		t.Fatal(err)
	}
	old, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	first, err := old.Readdirnames(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "e"), nil, 0644); err != nil {
		t.Fatal(err)
	}
	rest, err := old.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	got := append(first, rest...)
	slices.Sort(got)
	if !slices.Equal(got, want) && !slices.Equal(got, append(want, "e")) {
		t.Errorf("handle open across a create listed %v, want %v with or without e", got, want)
	}
	if now := names(t, dir); !slices.Equal(now, append(want, "e")) {
		t.Errorf("a new open lists %v, want %v", now, append(want, "e"))
	}
}

// upOps returns env's upstream requests by op name.
func upOps(env *harness.Env) map[string]uint64 {
	m := map[string]uint64{}
	for _, o := range env.Client.Stats.Snapshot().Ops {
		m[o.Op] = o.Count
	}
	return m
}

// Reading small files cold in cached mode costs one message each
// (ReadNode): the host never opens them for the guest's handles.
func TestCachedColdReadOneMessagePerFile(t *testing.T) {
	export := t.TempDir()
	makeTree(t, export, 2, 10)
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	statWalk(t, env.Mountpoint) // names and attributes cached
	before := upOps(env)
	n := readAll(t, env.Mountpoint)
	after := upOps(env)
	for _, op := range []string{"open", "release", "read"} {
		if d := after[op] - before[op]; d != 0 {
			t.Errorf("cold read of %d files sent %d %s, want 0", n, d, op)
		}
	}
	if d := after["readnode"] - before["readnode"]; d != uint64(n) {
		t.Errorf("cold read of %d files sent %d readnode, want one each", n, d)
	}
}

// A file opened lazily and then unlinked in the guest is still read
// whole through its handle, which the unlink made the host open first.
func TestLazyOpenSurvivesUnlink(t *testing.T) {
	export := t.TempDir()
	data := make([]byte, 3<<20) // more than one read
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(export, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	f, err := os.Open(filepath.Join(env.Mountpoint, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 4096)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(env.Mountpoint, "f")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatalf("read after unlink: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Error("read after unlink returned other data")
	}
}

// Against a host without FeatReadNode, lazily opened files are opened on
// the host at their first read, as before.
func TestColdReadWithoutReadNode(t *testing.T) {
	export := t.TempDir()
	makeTree(t, export, 1, 5)
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached),
		Server: upstream.ServerOptions{WithheldFeatures: upstream.FeatReadNode}})
	statWalk(t, env.Mountpoint)
	before := upOps(env)
	n := readAll(t, env.Mountpoint)
	after := upOps(env)
	if d := after["readnode"] - before["readnode"]; d != 0 {
		t.Errorf("%d readnode sent to a host that did not offer it", d)
	}
	if d := after["open"] - before["open"]; d != uint64(n) {
		t.Errorf("cold read of %d files sent %d open, want one each", n, d)
	}
}

package cachefs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// kernelTotal sums a connection's FUSE requests.
func kernelTotal(st *cachefs.Stats) uint64 {
	var n uint64
	for _, k := range st.Kernel {
		n += k.Count
	}
	return n
}

// cachedConnStats returns the cached connection's counters.
func cachedConnStats(t *testing.T, env *harness.Env) *cachefs.Stats {
	t.Helper()
	st := env.Guest.Stats()
	if st.Cached == nil {
		t.Fatal("no cached connection")
	}
	return st.Cached
}

// registerCached registers path cached through the guest.
func registerCached(t *testing.T, env *harness.Env, path string) {
	t.Helper()
	if _, err := env.Guest.Register(path, consistency.Cached); err != nil {
		t.Fatalf("Register(%q, cached): %v", path, err)
	}
}

// readTree reads every file under root.
func readTree(t *testing.T, root string) {
	t.Helper()
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		_, err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatalf("read tree: %v", err)
	}
}

// containerView bind-mounts the mountpoint's path as a container runtime
// would, and returns where: walks of it never pass the main connection's
// root and the registered directory's name in it, as walks of the
// mountpoint's own path do.
func containerView(t *testing.T, env *harness.Env, path string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount(filepath.Join(env.Mountpoint, path), dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// startCachedSrc starts an env whose export has src/ with files, and
// registers src cached; it returns the env and src on the host.
func startCachedSrc(t *testing.T, files map[string]string) (*harness.Env, string) {
	t.Helper()
	env := harness.Start(t, harness.Options{})
	dir := filepath.Join(env.Export, "src")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	registerCached(t, env, "src")
	return env, dir
}

// A warm walk and read of a cached registration is answered by the
// guest kernel alone: no FUSE request, no upstream message.
func TestCachedConnWarmWalkSendsNothing(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	makeTree(t, filepath.Join(env.Export, "src"), 10, 20)
	registerCached(t, env, "src")
	root := containerView(t, env, "src")
	for i := 0; i < 2; i++ {
		statWalk(t, root)
		readTree(t, root)
	}
	kernel, up := kernelTotal(cachedConnStats(t, env)), requests(env)
	if n := statWalk(t, root); n != 1+10*2+10*20 {
		t.Fatalf("walk saw %d entries", n)
	}
	readTree(t, root)
	st := cachedConnStats(t, env)
	if got := kernelTotal(st) - kernel; got != 0 {
		t.Errorf("warm walk and read: %d FUSE requests, want 0: %+v", got, st.Kernel)
	}
	if got := requests(env) - up; got != 0 {
		t.Errorf("warm walk and read: %d upstream messages, want 0: %+v", got, env.Client.Stats.Snapshot().Ops)
	}
	for _, k := range st.Kernel {
		switch k.Op {
		case "OPEN", "OPENDIR", "RELEASE", "RELEASEDIR", "FLUSH":
			if k.Count > 1 {
				t.Errorf("%s sent %d times: the kernel should have stopped after ENOSYS", k.Op, k.Count)
			}
		}
	}
}

// The same walk over a consistent subtree still asks for everything.
func TestConsistentSubtreeStillAsks(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	makeTree(t, filepath.Join(env.Export, "src"), 3, 5)
	if _, err := env.Guest.Register("src", consistency.Consistent); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(env.Mountpoint, "src")
	statWalk(t, root)
	readTree(t, root)
	before := env.Client.Stats.Total()
	statWalk(t, root)
	readTree(t, root)
	if got := env.Client.Stats.Total() - before; got < 3*5 {
		t.Errorf("warm consistent walk: %d upstream messages, want at least one per file", got)
	}
}

// A host edit shows through the cached view by invalidation.
func TestCachedConnSeesHostEdit(t *testing.T) {
	env, dir := startCachedSrc(t, map[string]string{"f": "one"})
	p := filepath.Join(env.Mountpoint, "src", "f")
	if b, err := os.ReadFile(p); err != nil || string(b) != "one" {
		t.Fatalf("read: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("two!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "g"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host's edit and create", func() bool {
		b, _ := os.ReadFile(p)
		_, err := os.Stat(filepath.Join(env.Mountpoint, "src", "g"))
		return string(b) == "two!" && err == nil
	})
}

// A write through the consistent connection is seen through the cached
// view of the same file before the write returns.
func TestCachedConnSeesConsistentWrite(t *testing.T) {
	env, _ := startCachedSrc(t, map[string]string{"f": "one"})
	// The main connection as no bind covers it.
	mainRoot, err := unix.Open(filepath.Join(env.Guest.RunDir(), "main"), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(mainRoot)
	cached := filepath.Join(env.Mountpoint, "src")
	if b, err := os.ReadFile(filepath.Join(cached, "f")); err != nil || string(b) != "one" {
		t.Fatalf("read: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(cached, "g")); !os.IsNotExist(err) {
		t.Fatalf("g before: %v", err)
	}
	// Through the main (consistent) connection, under the bind.
	f := openNoXdev(t, mainRoot, "src/f", unix.O_WRONLY|unix.O_TRUNC)
	if _, err := unix.Write(f, []byte("written")); err != nil {
		t.Fatal(err)
	}
	unix.Close(f)
	g := openNoXdev(t, mainRoot, "src/g", unix.O_WRONLY|unix.O_CREAT)
	unix.Close(g)
	if b, err := os.ReadFile(filepath.Join(cached, "f")); err != nil || !bytes.Equal(b, []byte("written")) {
		t.Errorf("cached view after a consistent write: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(cached, "g")); err != nil {
		t.Errorf("cached view after a consistent create: %v", err)
	}
}

// openNoXdev opens path under dirfd without crossing a mount.
func openNoXdev(t *testing.T, dirfd int, path string, flags int) int {
	t.Helper()
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_NO_XDEV}
	if flags&unix.O_CREAT != 0 {
		how.Mode = 0o644
	}
	fd, err := unix.Openat2(dirfd, path, how)
	if err != nil {
		t.Fatalf("openat2 %s: %v", path, err)
	}
	return fd
}

// Registering and unregistering puts the cached view on and takes it
// off; nested registrations keep their own mode.
func TestCachedConnRegisterUnregister(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	makeTree(t, filepath.Join(env.Export, "a"), 2, 2)
	id, err := env.Guest.Register("a", consistency.Cached)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := env.Guest.Register("a/d00", consistency.Consistent)
	if err != nil {
		t.Fatal(err)
	}
	a, d := filepath.Join(env.Mountpoint, "a"), filepath.Join(env.Mountpoint, "a", "d00")
	if !sameFS(t, a, cachedConnDir(t, env)) || sameFS(t, d, cachedConnDir(t, env)) {
		t.Errorf("after both registrations: a on the cached connection %v, a/d00 %v", sameFS(t, a, cachedConnDir(t, env)), sameFS(t, d, cachedConnDir(t, env)))
	}
	if err := env.Guest.Unregister(id); err != nil {
		t.Fatal(err)
	}
	if sameFS(t, a, cachedConnDir(t, env)) {
		t.Error("a still cached after unregister")
	}
	if err := env.Guest.Unregister(inner); err != nil {
		t.Fatal(err)
	}
	statWalk(t, env.Mountpoint)
}

func cachedConnDir(t *testing.T, env *harness.Env) string {
	return filepath.Join(env.Guest.RunDir(), "cached")
}

// sameFS reports whether a and b are on the same filesystem (device).
func sameFS(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev
}

// A host file open for reading in the guest, and unlinked or replaced
// through the cached view before it was read, stays readable.
func TestCachedConnUnlinkedHostFileReadable(t *testing.T) {
	env, _ := startCachedSrc(t, map[string]string{"f": "host data", "g": "replaced"})
	view := containerView(t, env, "src")
	f, err := os.Open(filepath.Join(view, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := os.Open(filepath.Join(view, "g"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := os.Remove(filepath.Join(view, "f")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(view, "h"), []byte("new"), 0o644)
	if err := os.Rename(filepath.Join(view, "h"), filepath.Join(view, "g")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    *os.File
		want string
	}{{f, "host data"}, {g, "replaced"}} {
		b := make([]byte, 64)
		n, err := c.f.ReadAt(b, 0)
		if string(b[:n]) != c.want {
			t.Errorf("read of %s after it lost its name: %q, %v; want %q", c.f.Name(), b[:n], err, c.want)
		}
	}
}

// Host changes raise inotify events in a container's view of a cached
// registration, and the actuation alters nothing on the host.
func TestCachedConnInotifySeesHostChanges(t *testing.T) {
	env, host := startCachedSrc(t, map[string]string{"f": "x"})
	guest := containerView(t, env, "src")
	os.ReadDir(guest)
	wait := inotifyWatch(t, guest)
	os.WriteFile(filepath.Join(host, "c"), []byte("x"), 0o644)
	wait(unix.IN_CREATE, "c")
	os.WriteFile(filepath.Join(host, "f"), []byte("appended"), 0o644)
	wait(unix.IN_MODIFY, "f")
	os.Remove(filepath.Join(host, "c"))
	wait(unix.IN_DELETE, "c")
	if got, _ := os.ReadFile(filepath.Join(host, "f")); string(got) != "appended" {
		t.Errorf("host file is %q after the actuator ran, want it untouched", got)
	}
	if _, err := os.Stat(filepath.Join(host, "c")); !os.IsNotExist(err) {
		t.Errorf("host c after the actuator ran: %v, want gone", err)
	}
}

// restartServer stops env's host server and starts a new one on the
// same socket and export, as a host daemon restart would.
func restartServer(t *testing.T, env *harness.Env) {
	t.Helper()
	env.Listener.Close()
	env.Server.Close()
	srv, err := upstream.NewServer(upstream.ServerOptions{Export: env.Export, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	l, err := upstream.Listen("unix://" + env.Socket)
	if err != nil {
		t.Fatal(err)
	}
	env.Server, env.Listener = srv, l // closed by env.Close, after the unmount
	go srv.Serve(l)
}

// The cached view goes on across a host server restart: names are
// found again in the new session, host changes made meanwhile show, and
// the registration's bind is still in place.
func TestCachedConnAcrossServerRestart(t *testing.T) {
	env, dir := startCachedSrc(t, map[string]string{"f": "before"})
	view := containerView(t, env, "src")
	if b, err := os.ReadFile(filepath.Join(view, "f")); err != nil || string(b) != "before" {
		t.Fatalf("read: %q, %v", b, err)
	}
	restartServer(t, env)
	os.WriteFile(filepath.Join(dir, "f"), []byte("after the restart"), 0o644)
	os.WriteFile(filepath.Join(dir, "g"), []byte("new"), 0o644)
	waitFor(t, "the new session's view", func() bool {
		b, _ := os.ReadFile(filepath.Join(view, "f"))
		g, _ := os.ReadFile(filepath.Join(view, "g"))
		return string(b) == "after the restart" && string(g) == "new"
	})
	if err := os.WriteFile(filepath.Join(view, "h"), []byte("guest"), 0o644); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "h")); string(b) != "guest" {
		t.Errorf("host has %q, want the guest's write", b)
	}
	if !sameFS(t, filepath.Join(env.Mountpoint, "src"), cachedConnDir(t, env)) {
		t.Error("the registration's bind is gone after the restart")
	}
}

package cachefs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"golang.org/x/sys/unix"
)

// bindMount bind-mounts dir elsewhere, as a container runtime mounts a
// registered subtree, so that path walks start at the subtree.
func bindMount(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	target := t.TempDir()
	if err := unix.Mount(dir, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
	return target
}

// walkCost returns the upstream requests of a warm stat walk of dir,
// seen through a bind mount of it.
func walkCost(t *testing.T, env *harness.Env, dir string) (entries int, reqs uint64) {
	t.Helper()
	dir = bindMount(t, dir)
	statWalk(t, dir)
	before := requests(env)
	entries = statWalk(t, dir)
	return entries, requests(env) - before
}

func TestOverlapStrongestModeWins(t *testing.T) {
	export := t.TempDir()
	makeTree(t, export, 3, 20)
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	env.FS.Register("d00", consistency.Consistent)
	env.FS.Register("d00/sub", consistency.Delegated)
	env.FS.Register("d01", consistency.Delegated)
	n, strong := walkCost(t, env, filepath.Join(env.Mountpoint, "d00"))
	if strong < uint64(n) {
		t.Errorf("d00 (consistent over delegated): warm walk sent %d requests for %d entries, want every one", strong, n)
	}
	n, weak := walkCost(t, env, filepath.Join(env.Mountpoint, "d01"))
	if weak > 2 {
		t.Errorf("d01 (delegated over cached default): warm walk sent %d requests for %d entries, want almost none", weak, n)
	}
}

func TestDefaultModeIsWeakest(t *testing.T) {
	export := t.TempDir()
	makeTree(t, export, 2, 10)
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Default)})
	env.FS.Register("d01", consistency.Cached)
	n, def := walkCost(t, env, filepath.Join(env.Mountpoint, "d00"))
	if def < uint64(n) {
		t.Errorf("default mode: warm walk sent %d requests for %d entries, want every one (as consistent)", def, n)
	}
	n, cached := walkCost(t, env, filepath.Join(env.Mountpoint, "d01"))
	if cached > 2 {
		t.Errorf("cached registration under default: warm walk sent %d requests for %d entries: %+v", cached, n, env.Client.Stats.Snapshot().Ops)
	}
}

func TestModeChangeDropsCaches(t *testing.T) {
	export := t.TempDir()
	makeTree(t, export, 1, 3)
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached),
		CacheTTL: time.Hour})
	f := filepath.Join(env.Mountpoint, "d00/sub/f000.go")
	if _, err := os.ReadFile(f); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(env.Mountpoint, "d00/new")); !os.IsNotExist(err) {
		t.Fatalf("stat of missing file: %v", err)
	}
	os.WriteFile(filepath.Join(export, "d00/sub/f000.go"), []byte("changed on host\n"), 0644)
	os.WriteFile(filepath.Join(export, "d00/new"), []byte("new\n"), 0644)
	env.FS.Register("d00", consistency.Consistent)
	if got, err := os.ReadFile(f); err != nil || string(got) != "changed on host\n" {
		t.Errorf("after registering consistent: read %q, %v; want the host's content", got, err)
	}
	if _, err := os.Stat(filepath.Join(env.Mountpoint, "d00/new")); err != nil {
		t.Errorf("after registering consistent, file created on host: %v", err)
	}
}

func TestCachedWriteReachesHostAtOnce(t *testing.T) {
	export := t.TempDir()
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	p := filepath.Join(env.Mountpoint, "w")
	if err := os.WriteFile(p, []byte("one"), 0644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(export, "w")); string(got) != "one" {
		t.Fatalf("host sees %q after guest write, want one", got)
	}
	if err := os.WriteFile(p, []byte("two!"), 0644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(export, "w")); string(got) != "two!" {
		t.Errorf("host sees %q after second guest write, want two!", got)
	}
	if got, _ := os.ReadFile(p); string(got) != "two!" {
		t.Errorf("guest sees %q after its own write, want two!", got)
	}
	if err := os.Rename(p, p+"2"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(export, "w2")); err != nil {
		t.Errorf("host after guest rename: %v", err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("guest still sees renamed name: %v", err)
	}
}

func TestCachedRevalidatesAfterTTL(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("old"), 0644)
	const ttl = 200 * time.Millisecond
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached), CacheTTL: ttl})
	p := filepath.Join(env.Mountpoint, "f")
	if got, _ := os.ReadFile(p); string(got) != "old" {
		t.Fatalf("read %q, want old", got)
	}
	os.WriteFile(filepath.Join(export, "f"), []byte("newer"), 0644)
	os.WriteFile(filepath.Join(export, "g"), []byte("g"), 0644)
	time.Sleep(ttl + 50*time.Millisecond)
	if got, _ := os.ReadFile(p); string(got) != "newer" {
		t.Errorf("after the TTL the guest reads %q, want newer", got)
	}
	if _, err := os.Stat(filepath.Join(env.Mountpoint, "g")); err != nil {
		t.Errorf("after the TTL a host-created file: %v", err)
	}
}

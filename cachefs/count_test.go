package cachefs_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// makeTree creates dirs x files small files under root.
func makeTree(t *testing.T, root string, dirs, files int) {
	t.Helper()
	for d := 0; d < dirs; d++ {
		dir := filepath.Join(root, fmt.Sprintf("d%02d", d), "sub")
		if err := os.MkdirAll(dir, 0755); err != nil {
			t.Fatal(err)
		}
		for f := 0; f < files; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.go", f)), []byte("package x\n"), 0644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// statWalk lstats everything under root and returns how many entries
// it saw.
func statWalk(t *testing.T, root string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if _, err := os.Lstat(p); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
	return n
}

// requests returns how many upstream requests env's client completed.
func requests(env *harness.Env) uint64 { return env.Client.Stats.Total() }

func TestDDOneWritePerBlock(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	f, err := os.Create(filepath.Join(envMnt(t, env), "dd"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1024)
	before := env.Client.Stats.Requests(upstream.OpWrite)
	total := requests(env)
	const blocks = 1000
	for i := 0; i < blocks; i++ {
		if _, err := f.Write(buf); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if got := env.Client.Stats.Requests(upstream.OpWrite) - before; got != blocks {
		t.Errorf("upstream writes = %d, want %d", got, blocks)
	}
	if got := requests(env) - total; got != blocks {
		t.Errorf("upstream requests = %d for %d writes, want one each; %+v", got, blocks, env.Client.Stats.Snapshot().Ops)
	}
}

func envMnt(t *testing.T, env *harness.Env) string { return env.Mountpoint }

func TestCachedWalkSendsAlmostNothing(t *testing.T) {
	export := t.TempDir()
	makeTree(t, export, 10, 30)
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	cold0 := requests(env)
	n := statWalk(t, env.Mountpoint)
	cold := requests(env) - cold0
	warm0 := requests(env)
	if m := statWalk(t, env.Mountpoint); m != n {
		t.Fatalf("second walk saw %d entries, first %d", m, n)
	}
	warm := requests(env) - warm0
	t.Logf("%d entries: cold walk %d requests, warm walk %d", n, cold, warm)
	if warm > uint64(n/50) {
		t.Errorf("warm cached walk sent %d requests for %d entries, want almost none", warm, n)
	}
}

func TestConsistentWalkSendsEverything(t *testing.T) {
	export := t.TempDir()
	makeTree(t, export, 10, 30)
	env := harness.Start(t, harness.Options{Export: export})
	n := statWalk(t, env.Mountpoint)
	warm0 := requests(env)
	statWalk(t, env.Mountpoint)
	warm := requests(env) - warm0
	t.Logf("%d entries: warm consistent walk %d requests", n, warm)
	if warm < uint64(n) {
		t.Errorf("consistent walk sent %d requests for %d entries, want at least one each", warm, n)
	}
}

// readAll reads every regular file under root.
func readAll(t *testing.T, root string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if _, err := os.ReadFile(p); err != nil {
				t.Fatalf("read %s: %v", p, err)
			}
			n++
		}
		return nil
	})
	return n
}

func TestCachedRereadSendsNothing(t *testing.T) {
	export := t.TempDir()
	makeTree(t, export, 4, 25)
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	n := readAll(t, env.Mountpoint)
	before := requests(env)
	readAll(t, env.Mountpoint)
	if warm := requests(env) - before; warm > uint64(n/50) {
		t.Errorf("warm re-read of %d files sent %d requests, want almost none", n, warm)
	}
}

func TestCachedMissingXattrAskedOnce(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), nil, 0644)
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	p := filepath.Join(env.Mountpoint, "f")
	buf := make([]byte, 64)
	if _, err := unix.Getxattr(p, "user.missing", buf); err != unix.ENODATA {
		t.Fatalf("Getxattr: %v, want ENODATA", err)
	}
	before := env.Client.Stats.Requests(upstream.OpGetxattr)
	for i := 0; i < 10; i++ {
		unix.Getxattr(p, "user.missing", buf)
	}
	if got := env.Client.Stats.Requests(upstream.OpGetxattr) - before; got != 0 {
		t.Errorf("repeated getxattr of a missing name sent %d requests, want 0", got)
	}
	if err := unix.Setxattr(p, "user.missing", []byte("now"), 0); err != nil {
		t.Fatal(err)
	}
	if n, err := unix.Getxattr(p, "user.missing", buf); err != nil || string(buf[:n]) != "now" {
		t.Errorf("after setxattr: %q, %v", buf[:max(n, 0)], err)
	}
}

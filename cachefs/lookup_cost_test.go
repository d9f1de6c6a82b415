package cachefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// cachedDir starts a cached-mode mount with a state directory (so the
// write-back engine exists, as under cachefsd) whose export has d/ with
// n files, lists d once, and returns the env, d's node id and its names.
func cachedDir(t testing.TB, n int) (*harness.Env, uint64, []string) {
	export := t.TempDir()
	d := filepath.Join(export, "d")
	if err := os.Mkdir(d, 0755); err != nil {
		t.Fatal(err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("f%d", i)
		if err := os.WriteFile(filepath.Join(d, names[i]), nil, 0644); err != nil {
			t.Fatal(err)
		}
	}
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	if _, err := os.ReadDir(filepath.Join(env.Mountpoint, "d")); err != nil {
		t.Fatal(err)
	}
	var out fuse.EntryOut
	if st := env.FS.Lookup(nil, &fuse.InHeader{NodeId: fuse.FUSE_ROOT_ID}, "d", &out); !st.Ok() {
		t.Fatalf("Lookup d: %v", st)
	}
	return env, out.NodeId, names
}

// A LOOKUP of a name the cache holds allocates nothing in cachefs and
// sends nothing to the host.
func TestCachedLookupCost(t *testing.T) {
	env, dir, names := cachedDir(t, 10)
	h := &fuse.InHeader{NodeId: dir}
	var out fuse.EntryOut
	before := requests(env)
	allocs := testing.AllocsPerRun(200, func() {
		if st := env.FS.Lookup(nil, h, names[3], &out); !st.Ok() {
			t.Fatalf("Lookup: %v", st)
		}
	})
	if allocs != 0 {
		t.Errorf("allocations per cached lookup = %v, want 0", allocs)
	}
	if got := requests(env) - before; got != 0 {
		t.Errorf("upstream requests = %d, want 0", got)
	}
}

// BenchmarkCachedLookup times FS.Lookup of cached names, each once in
// turn, in a directory of 30,000.
func BenchmarkCachedLookup(b *testing.B) {
	env, dir, names := cachedDir(b, 30000)
	h := &fuse.InHeader{NodeId: dir}
	var out fuse.EntryOut
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if st := env.FS.Lookup(nil, h, names[i%len(names)], &out); !st.Ok() {
			b.Fatalf("Lookup: %v", st)
		}
	}
}

package cachefs_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
)

// names lists dir through a new open.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// An owned directory of a delegated subtree serves its opens one shared
// listing until it changes: each change (create, link, unlink, rename
// in and out) shows to the next open, and a handle open across a change
// keeps reading what it opened.
func TestDelegatedListingFollowsChanges(t *testing.T) {
	env := harness.Start(t, harness.Options{Export: t.TempDir(), StateDir: t.TempDir(),
		Policy: consistency.NewPolicy(consistency.Delegated)})
	dir := filepath.Join(env.Mountpoint, "d")
	other := filepath.Join(env.Mountpoint, "o")
	for _, d := range []string{dir, other} {
		if err := os.Mkdir(d, 0755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0644); err != nil {
			t.Fatal(err)
		}
	}
	want := func(step string, w ...string) {
		t.Helper()
		if got := names(t, dir); !slices.Equal(got, w) {
			t.Errorf("after %s: lists %v, want %v", step, got, w)
		}
	}
	want("creates", "a", "b")
	h, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	first, err := h.Readdirnames(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "c"), nil, 0644); err != nil {
		t.Fatal(err)
	}
	want("create", "a", "b", "c")
	rest, err := h.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	if got := append(first, rest...); !slices.Equal(got, []string{"a", "b"}) && !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("handle open across a create read %v", got)
	}
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	want("link", "a", "b", "c", "l")
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	want("unlink", "b", "c", "l")
	if err := os.Rename(filepath.Join(dir, "b"), filepath.Join(other, "b")); err != nil {
		t.Fatal(err)
	}
	want("rename out", "c", "l")
	if got := names(t, other); !slices.Equal(got, []string{"b"}) {
		t.Errorf("rename target lists %v, want [b]", got)
	}
	if err := os.Rename(filepath.Join(other, "b"), filepath.Join(dir, "z")); err != nil {
		t.Fatal(err)
	}
	want("rename in", "c", "l", "z")
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
	host, err := os.ReadDir(filepath.Join(env.Export, "d"))
	if err != nil {
		t.Fatal(err)
	}
	if len(host) != 3 {
		t.Errorf("host has %d entries in d after flush, want 3", len(host))
	}
}

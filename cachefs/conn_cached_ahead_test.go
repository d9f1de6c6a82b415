package cachefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/internal/harness"
)

// A cold read of a directory's small files through the cached
// connection fetches them in one message, not one each; a file changed
// on the host afterwards is read anew, not from what was fetched.
func TestCachedConnReadsAhead(t *testing.T) {
	const files = 40
	export := t.TempDir() // filled before the server starts: no host events meanwhile
	src := filepath.Join(export, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range files {
		name := fmt.Sprintf("f%02d.go", i)
		want[name] = fmt.Sprintf("package p // %d %s", i, name)
		if err := os.WriteFile(filepath.Join(src, name), []byte(want[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := harness.Start(t, harness.Options{Export: export})
	registerCached(t, env, "src")
	root := containerView(t, env, "src")
	if _, err := os.ReadDir(root); err != nil { // lists src, as go list and grep -r do first
		t.Fatal(err)
	}
	before := upOps(env)
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || string(got) != data {
			t.Fatalf("read %s: %q, %v; want %q", name, got, err, data)
		}
	}
	after := upOps(env)
	if n := after["readnodes"] - before["readnodes"]; n != 1 {
		t.Errorf("%d readnodes messages for %d small files of one directory, want 1", n, files)
	}
	if n := after["readnode"] + after["read"] - before["readnode"] - before["read"]; n != 0 {
		t.Errorf("%d reads of single files, want none: %v", n, after)
	}

	name := filepath.Join(src, "f07.go")
	if err := os.WriteFile(name, []byte("package p // changed on the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reading f07.go's new contents after a host change", func() bool {
		return readsAs(filepath.Join(root, "f07.go"), "package p // changed on the host")
	})
}

// readsAs reports whether the file at p holds want.
func readsAs(p, want string) bool {
	got, err := os.ReadFile(p)
	return err == nil && string(got) == want
}

// A file read ahead and then changed on the host with its size and
// mtime as they were (a write in the same clock tick, or a tool that
// restores times) is read anew: the change dropped its attributes,
// and with them what was read ahead.
func TestCachedConnReadAheadSameTimes(t *testing.T) {
	export := t.TempDir()
	src := filepath.Join(export, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.go", "b.go"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte("package p // old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := harness.Start(t, harness.Options{Export: export})
	registerCached(t, env, "src")
	root := containerView(t, env, "src")
	if _, err := os.ReadDir(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(root, "a.go")); err != nil { // reads b.go ahead too
		t.Fatal(err)
	}
	if n := upOps(env)["readnodes"]; n != 1 {
		t.Fatalf("%d readnodes, want 1 (the read-ahead this test is about)", n)
	}
	host := filepath.Join(src, "b.go")
	fi, err := os.Stat(host)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(host, []byte("package p // new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(host, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reading b.go's new contents after a host change that kept its size and mtime", func() bool {
		return readsAs(filepath.Join(root, "b.go"), "package p // new")
	})
}

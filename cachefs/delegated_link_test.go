package cachefs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDelegatedLinkRenameKeepsData: a file with a second name loses the
// name the guest knew it by (removed, or replaced by a rename), then
// changes mode and grows through another name, all in the guest: after
// a flush the host's copy holds every byte and the mode.
func TestDelegatedLinkRenameKeepsData(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []string // op, then paths
	}{
		{"link mv rm", []string{"link x l", "rename x m", "remove l"}},
		{"rename over a link", []string{"write y", "link x m", "rename y x"}},
		{"link rm", []string{"link x m", "remove x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			export := t.TempDir()
			env := startDelegated(t, export, t.TempDir())
			runLinkSteps(t, env.Mountpoint, append([]string{"write x"}, c.steps...))
			runLinkSteps(t, env.Mountpoint, []string{"chmod m", "append m"})
			if failed := env.FS.WriteBack(); len(failed) > 0 {
				t.Fatalf("write-back failures: %+v", failed)
			}
			for _, root := range []string{env.Mountpoint, export} {
				wantFile(t, filepath.Join(root, "m"), "first second", 0600)
				if _, err := os.Lstat(filepath.Join(root, "l")); !os.IsNotExist(err) {
					t.Errorf("l under %s: got %v, want it gone", root, err)
				}
			}
		})
	}
}

// runLinkSteps runs steps such as "link x l" on names in dir.
func runLinkSteps(t *testing.T, dir string, steps []string) {
	t.Helper()
	for _, s := range steps {
		var op, a, b string
		fmt.Sscan(s, &op, &a, &b)
		a, b = filepath.Join(dir, a), filepath.Join(dir, b)
		var err error
		switch op {
		case "write":
			err = os.WriteFile(a, []byte("first "), 0644)
		case "link":
			err = os.Link(a, b)
		case "rename":
			err = os.Rename(a, b)
		case "remove":
			err = os.Remove(a)
		case "chmod":
			err = os.Chmod(a, 0600)
		case "append":
			var f *os.File
			if f, err = os.OpenFile(a, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				_, err = f.Write([]byte("second"))
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// wantFile fails the test unless p holds data with permissions perm.
func wantFile(t *testing.T, p, data string, perm os.FileMode) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	if string(got) != data {
		t.Errorf("%s: got %q, want %q", p, got, data)
	}
	if st, err := os.Lstat(p); err != nil || st.Mode().Perm() != perm {
		t.Errorf("mode of %s: got %v (%v), want %v", p, st.Mode().Perm(), err, perm)
	}
}

// TestDelegatedParkNameRefused: a FUSE delegated subtree refuses to
// make a name the write-back parks objects at (upstream.ParkPrefix),
// as the host and the overlay do: the host hides such names, so a file
// made under one in the guest would vanish there once written back.
func TestDelegatedParkNameRefused(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	park := filepath.Join(env.Mountpoint, ".cachefs-move-9")
	if err := os.WriteFile(park, []byte("x"), 0o644); !errors.Is(err, syscall.EPERM) {
		t.Errorf("create %s: %v, want EPERM", park, err)
	}
	if err := os.Mkdir(park, 0o755); !errors.Is(err, syscall.EPERM) {
		t.Errorf("mkdir %s: %v, want EPERM", park, err)
	}
	if err := os.Symlink("t", park); !errors.Is(err, syscall.EPERM) {
		t.Errorf("symlink %s: %v, want EPERM", park, err)
	}
	f := filepath.Join(env.Mountpoint, "f")
	if err := os.WriteFile(f, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f, park); !errors.Is(err, syscall.EPERM) {
		t.Errorf("rename to %s: %v, want EPERM", park, err)
	}
	if err := os.Link(f, park); !errors.Is(err, syscall.EPERM) {
		t.Errorf("link to %s: %v, want EPERM", park, err)
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
	wantFile(t, filepath.Join(export, "f"), "data", 0o644)
}

// TestDelegatedReplacedOpenFile: a file the guest opened after it was
// written back (a lazy open, read by node) and then replaced by a
// rename keeps reading its own data after the rename is written back.
// The host could no longer reach it through the portable backend, which
// reopens a node by its name only (macOS's way): the read failed with
// ESTALE. The replaced file's data is now copied into the guest when a
// name with lazily opened handles is replaced or removed.
func TestDelegatedReplacedOpenFile(t *testing.T) {
	for _, backend := range []string{"handles", "portable"} {
		t.Run(backend, func(t *testing.T) {
			t.Setenv("CACHEFS_BACKEND", backend)
			export := t.TempDir()
			env := startDelegated(t, export, t.TempDir())
			a, b := filepath.Join(env.Mountpoint, "a"), filepath.Join(env.Mountpoint, "b")
			for p, data := range map[string]string{a: "new", b: "old"} {
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if failed := env.FS.WriteBack(); len(failed) > 0 {
				t.Fatalf("write-back failures: %+v", failed)
			}
			old, err := os.Open(b)
			if err != nil {
				t.Fatal(err)
			}
			defer old.Close()
			if err := os.Rename(a, b); err != nil {
				t.Fatal(err)
			}
			if failed := env.FS.WriteBack(); len(failed) > 0 {
				t.Fatalf("write-back failures: %+v", failed)
			}
			buf := make([]byte, 16)
			if n, err := old.ReadAt(buf, 0); string(buf[:n]) != "old" {
				t.Errorf("the replaced file through its descriptor: %q, %v; want \"old\"", buf[:n], err)
			}
			wantFile(t, filepath.Join(export, "b"), "new", 0o644)
		})
	}
}

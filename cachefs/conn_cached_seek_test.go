package cachefs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/internal/harness"

	"golang.org/x/sys/unix"
)

// seekIn opens name and seeks from off with whence.
func seekIn(t *testing.T, name string, off int64, whence int) (int64, error) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return unix.Seek(int(f.Fd()), off, whence)
}

// A file with no holes is known dense after one SEEK_HOLE: later seeks
// are answered without the host, a sparse file's are still the host's,
// and a write that makes a hole is seen at once.
func TestCachedConnSeekDense(t *testing.T) {
	export := t.TempDir() // filled before the server starts: no host events during the test
	src := filepath.Join(export, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "dense"), make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(filepath.Join(src, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sparse.WriteAt([]byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := sparse.WriteAt([]byte("b"), 1<<20); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	env := harness.Start(t, harness.Options{Export: export})
	registerCached(t, env, "src")
	root := containerView(t, env, "src")
	dense := filepath.Join(root, "dense")
	expect := func(name string, off int64, whence int, want int64, wantErr error) {
		t.Helper()
		got, err := seekIn(t, name, off, whence)
		if !errors.Is(err, wantErr) || (err == nil && got != want) {
			t.Errorf("lseek(%s, %d, %d) = %d, %v; want %d, %v", filepath.Base(name), off, whence, got, err, want, wantErr)
		}
	}
	seeks := func() {
		expect(dense, 4096, unix.SEEK_HOLE, 8192, nil) // as grep asks, past what it read
		expect(dense, 0, unix.SEEK_HOLE, 8192, nil)
		expect(dense, 100, unix.SEEK_DATA, 100, nil)
		expect(dense, 8000, unix.SEEK_HOLE, 8192, nil)
		expect(dense, 8192, unix.SEEK_DATA, 0, unix.ENXIO)
		expect(dense, 9000, unix.SEEK_HOLE, 0, unix.ENXIO)
	}
	seeks()
	seeks()
	before, ops := requests(env), upOps(env)
	seeks()
	seeks()
	if got := requests(env) - before; got != 0 {
		t.Errorf("seeks in a dense file sent %d upstream messages, want 0: before %v, after %v", got, ops, upOps(env))
	}
	if n := ops["lseek"]; n != 1 {
		t.Errorf("%d lseeks reached the host, want the first only", n)
	}
	sp := filepath.Join(root, "sparse")
	for range 2 {
		if hole, err := seekIn(t, sp, 0, unix.SEEK_HOLE); err != nil || hole < 1 || hole >= 1<<20 {
			t.Errorf("SEEK_HOLE in the sparse file: %d, %v; want the hole after the first block", hole, err)
		}
	}
	f, err := os.OpenFile(dense, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("z"), 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if hole, err := seekIn(t, dense, 0, unix.SEEK_HOLE); err != nil || hole >= 1<<20 {
		t.Errorf("SEEK_HOLE after a write past a hole: %d, %v; want the hole after 8192", hole, err)
	}
}

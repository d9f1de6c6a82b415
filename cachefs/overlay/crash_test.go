package overlay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/upstream"
)

// crashScene makes a host tree and an upper directory with a bit of
// everything a pass sends: moves (a redirected directory, a swap), a
// removal, an opaque directory with new contents, data and attributes.
func crashScene(f *fixture) {
	f.hostFile("d1/f", "f")
	f.hostFile("d1/sub/s", "s")
	f.hostFile("a/x", "from a")
	f.hostFile("b/y", "from b")
	f.hostFile("gone/z", "z")
	f.hostFile("opq/old", "old")
	os.Mkdir(filepath.Join(f.upper, "d2"), 0o755)
	f.mark("d2", xattrRedirect, "d1")
	f.whiteout("d1")
	f.upperFile("d2/new", "new")
	for _, d := range [][2]string{{"a", "b"}, {"b", "a"}} {
		os.Mkdir(filepath.Join(f.upper, d[0]), 0o755)
		f.mark(d[0], xattrRedirect, d[1])
	}
	f.whiteout("gone")
	f.upperFile("opq/new", "new in opq")
	f.mark("opq", xattrOpaque, "y")
	f.upperFile("data", "some data")
	os.Chmod(filepath.Join(f.upper, "data"), 0o640)
}

// TestCrashMidPass: the daemon dies in the middle of a pass, after the
// host applied its first n ops and before the pass's state was logged;
// a new engine on the state as it was writes the rest back, and the
// host's tree is the same as without the crash, whatever n.
func TestCrashMidPass(t *testing.T) {
	want := func() map[string]string {
		f := newFixture(t)
		crashScene(f)
		f.flush()
		return hostTree(t, f.h.export)
	}()
	for n := 1; n < 40; n += 2 {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newFixture(t)
			crashScene(f)
			crashAfter(t, f, n)
			f.start(false)
			f.flush()
			got := hostTree(t, f.h.export)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("host after a crash at op %d:\n%v\nwant\n%v", n, got, want)
			}
		})
	}
}

// crashAfter runs passes whose sender applies n ops in all and then
// fails, as a daemon killed then; the state files are left as the last
// pass before that one left them.
func crashAfter(t *testing.T, f *fixture, n int) {
	t.Helper()
	sent := 0
	crash := errors.New("killed")
	send := func(ctx context.Context, ops []upstream.WBOp) ([]uint32, error) {
		k := min(len(ops), n-sent)
		sent += k
		errnos, err := f.h.send(ctx, ops[:k])
		if k < len(ops) || err != nil {
			return nil, crash
		}
		return errnos, nil
	}
	e, err := newEngine(Options{Upper: f.upper, State: f.state, Send: send, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer e.closeFDs()
	e.ctx = context.Background()
	saved := saveFiles(t, f.state, f.state+".log")
	for i := 0; i < 5; i++ {
		if out := e.pass(true, i == 0); out.err != nil {
			restoreFiles(t, saved)
			return
		}
		saved = saveFiles(t, f.state, f.state+".log")
	}
}

// saveFiles returns the contents of files (nil for a missing one).
func saveFiles(t *testing.T, paths ...string) map[string][]byte {
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out[p] = b
	}
	return out
}

func restoreFiles(t *testing.T, saved map[string][]byte) {
	for p, b := range saved {
		os.Remove(p)
		if b != nil {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// hostTree describes every path under root: type, mode and contents.
func hostTree(t *testing.T, root string) map[string]string {
	out := map[string]string{}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil // its mode is the umask's when the test made it
		}
		d := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			d += " " + string(b)
		}
		out[rel] = d
		return nil
	})
	return out
}

package overlay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// passEngine is an engine that watches f's upper directory and whose
// passes the test runs itself, on its own goroutine.
func passEngine(t *testing.T, f *fixture) *Engine {
	t.Helper()
	e, err := newEngine(Options{Upper: f.upper, State: f.state, Send: f.h.send, Watch: true, Logf: t.Logf})
	if err != nil {
		t.Fatalf("newEngine: %v", err)
	}
	t.Cleanup(e.closeFDs)
	e.ctx = context.Background()
	e.pass(true, true)
	f.h.take()
	return e
}

// TestWatchedPass: a pass rescans the directories the watcher saw
// change, including new ones made inside them and a directory moved.
func TestWatchedPass(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.upper, "a/b"), 0o755)
	e := passEngine(t, f)
	f.upperFile("a/b/new/deep/file", "deep")
	os.Rename(filepath.Join(f.upper, "a/b"), filepath.Join(f.upper, "moved"))
	f.upperFile("moved/file2", "2")
	e.w.read()
	e.pass(false, false)
	f.wantHost("moved/new/deep/file", "deep")
	f.wantHost("moved/file2", "2")
	f.wantHost("a/b", "-")
	if ops := f.h.take(); count(ops, upstream.WBWrite) != 2 {
		t.Errorf("ops %+v, want two writes", ops)
	}
}

// TestOverflowRescans: changes whose events were lost are found by the
// pass after a queue overflow, which rescans everything; a pass with
// no event finds nothing.
func TestOverflowRescans(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.upper, "d"), 0o755)
	e := passEngine(t, f)
	f.upperFile("d/lost", "lost")
	e.w.read()
	e.w.take() // the events are lost
	e.pass(false, false)
	f.wantHost("d/lost", "-")
	e.w.event(-1, 0x4000 /* IN_Q_OVERFLOW */, 0, "")
	e.pass(false, false)
	f.wantHost("d/lost", "lost")
}

// TestWriteHints: a write that leaves a file's size and mtime as they
// were is sent because the watcher saw it (IN_MODIFY).
func TestWriteHints(t *testing.T) {
	f := newFixture(t)
	f.upperFile("f", "aaaa")
	e := passEngine(t, f)
	p := filepath.Join(f.upper, "f")
	fi, _ := os.Stat(p)
	os.WriteFile(p, []byte("bbbb"), 0o644)
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	e.w.read()
	e.pass(false, false)
	f.wantHost("f", "bbbb")
}

// TestMappedWrites: a write through a shared mapping into a page a
// pass has read reaches the host (it raises no event, and changes the
// mtime only when it dirties a clean page).
func TestMappedWrites(t *testing.T) {
	f := newFixture(t)
	p := filepath.Join(f.upper, "f")
	os.WriteFile(p, bytes.Repeat([]byte{0xaa}, 8192), 0o644)
	fd, _ := os.OpenFile(p, os.O_RDWR, 0)
	defer fd.Close()
	m, err := unix.Mmap(int(fd.Fd()), 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	defer unix.Munmap(m)
	m[0] = 1 // dirty before the first pass
	e := passEngine(t, f)
	m[1] = 2 // the same page, after the pass read it
	unix.Msync(m, unix.MS_SYNC)
	e.w.read()
	e.pass(true, false)
	wantSame(t, filepath.Join(f.h.export, "f"), p)
}

// TestPunchedHole: a hole punched in a file written back reads as
// zeros on the host too.
func TestPunchedHole(t *testing.T) {
	f := newFixture(t)
	p := filepath.Join(f.upper, "f")
	os.WriteFile(p, bytes.Repeat([]byte{0xaa}, 1<<20), 0o644)
	f.flush()
	fd, _ := os.OpenFile(p, os.O_RDWR, 0)
	defer fd.Close()
	if err := unix.Fallocate(int(fd.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 256<<10, 256<<10); err != nil {
		t.Skipf("punch hole: %v", err)
	}
	f.flush()
	wantSame(t, filepath.Join(f.h.export, "f"), p)
}

// wantSame fails the test unless the files at got and want hold the
// same bytes.
func wantSame(t *testing.T, got, want string) {
	t.Helper()
	g, _ := os.ReadFile(got)
	w, _ := os.ReadFile(want)
	if !bytes.Equal(g, w) {
		i := 0
		for i < min(len(g), len(w)) && g[i] == w[i] {
			i++
		}
		t.Errorf("%s differs from %s from byte %d (sizes %d, %d)", got, want, i, len(g), len(w))
	}
}

// TestGrowingFileSentOnce: a file written in many small writes, each
// sooner after the last than Gather, is written back once it is
// written, not again at every pass while it grows (the first engine
// sent a 100 MB dd 3 times over).
func TestGrowingFileSentOnce(t *testing.T) {
	f := newFixture(t)
	f.start(true)
	file, err := os.Create(filepath.Join(f.upper, "grows"))
	if err != nil {
		t.Fatal(err)
	}
	const writes, size = 100, 1024
	for i := 0; i < writes; i++ {
		if _, err := file.Write(bytes.Repeat([]byte{byte(i)}, size)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	file.Close()
	f.flush()
	if got := f.eng.Stats().Bytes; got >= 3*writes*size {
		t.Errorf("%d bytes written back for a file of %d, want it sent about once", got, writes*size)
	}
}

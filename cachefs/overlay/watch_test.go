package overlay

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	e.w.wake()
	e.w.take() // the events, and the quiet directories they made, are lost
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

// watchMaskOf returns the mask of e's watch on upper directory rel, as
// the inotify descriptor's fdinfo shows it.
func watchMaskOf(t *testing.T, e *Engine, rel string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(e.o.Upper, rel), &st); err != nil {
		t.Fatal(err)
	}
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", e.w.fd))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		var wd int
		var ino, sdev, mask uint64
		if n, _ := fmt.Sscanf(line, "inotify wd:%d ino:%x sdev:%x mask:%x", &wd, &ino, &sdev, &mask); n == 4 && ino == st.Ino {
			return uint32(mask)
		}
	}
	t.Fatalf("no watch on %s in %s", rel, info)
	return 0
}

// TestQuietDirectory: a write takes IN_MODIFY from its directory's
// watch (the writes after it raise no event), and the next pass gives
// it back before it reads the file, and sends it.
func TestQuietDirectory(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.upper, "d"), 0o755)
	f.upperFile("d/f", "a")
	var e *Engine
	writes := 0
	send := func(ctx context.Context, ops []upstream.WBOp) ([]uint32, error) {
		if count(ops, upstream.WBWrite) > 0 && e != nil {
			writes++
			if m := watchMaskOf(t, e, "d"); m&unix.IN_MODIFY == 0 {
				t.Errorf("data read with mask %#x: a write in progress could end unseen", m)
			}
		}
		return f.h.send(ctx, ops)
	}
	e, err := newEngine(Options{Upper: f.upper, State: f.state, Send: send, Watch: true, Logf: t.Logf})
	if err != nil {
		t.Fatalf("newEngine: %v", err)
	}
	t.Cleanup(e.closeFDs)
	e.ctx = context.Background()
	e.pass(true, true)
	if m := watchMaskOf(t, e, "d"); m&unix.IN_MODIFY == 0 {
		t.Fatalf("mask %#x before a write, want IN_MODIFY", m)
	}
	fd, err := os.OpenFile(filepath.Join(f.upper, "d/f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd.WriteString("b")
	e.w.read()
	if m := watchMaskOf(t, e, "d"); m&unix.IN_MODIFY != 0 {
		t.Errorf("mask %#x after a write, want no IN_MODIFY", m)
	}
	if m := watchMaskOf(t, e, ""); m&unix.IN_MODIFY == 0 {
		t.Errorf("root's mask %#x, want IN_MODIFY: only d was written in", m)
	}
	for i := 0; i < 100; i++ {
		fd.WriteString("c")
	}
	fd.Close()
	e.w.read()
	if m := e.w.modified[e.w.find("d")]; !m["f"] {
		t.Errorf("modified %v, want f", m)
	}
	e.pass(false, false)
	if m := watchMaskOf(t, e, "d"); m&unix.IN_MODIFY == 0 {
		t.Errorf("mask %#x after a pass, want IN_MODIFY back", m)
	}
	f.wantHost("d/f", "ab"+strings.Repeat("c", 100))
	if q := e.Stats().Quieted; q != 1 || writes != 2 {
		t.Errorf("Quieted %d, want 1; %d batches with data, want 2", q, writes)
	}
}

// TestQuietWaitsForWriter: a file a pass read while it was open for
// writing keeps its directory awake, so that the end of a write in
// progress during the read raises its event; its record has no ctime
// until a pass reads it with no writer.
func TestQuietWaitsForWriter(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.upper, "d"), 0o755)
	f.upperFile("d/f", "aaaa")
	e := passEngine(t, f)
	p := filepath.Join(f.upper, "d/f")
	fd, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	fd.WriteAt([]byte("bbbb"), 0)
	e.w.read()
	if m := watchMaskOf(t, e, "d"); m&unix.IN_MODIFY != 0 {
		t.Fatalf("mask %#x after a write, want no IN_MODIFY", m)
	}
	e.pass(false, false)
	f.wantHost("d/f", "bbbb")
	if n := e.st.find("d/f"); n == nil || n.rec.Ctime != 0 {
		t.Errorf("record of d/f read while open for writing: %+v, want no ctime", n)
	}
	fi, _ := os.Stat(p)
	fd.WriteAt([]byte("cccc"), 0) // as a write in progress during the read would
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	e.w.read()
	if m := watchMaskOf(t, e, "d"); m&unix.IN_MODIFY == 0 {
		t.Errorf("mask %#x: d went quiet while holding a file read with a writer", m)
	}
	fd.Close()
	e.w.read()
	e.pass(false, false)
	f.wantHost("d/f", "cccc")
	if n := e.st.find("d/f"); n == nil || n.rec.Ctime == 0 {
		t.Errorf("record of d/f read with no writer: %+v, want its ctime", n)
	}
	os.WriteFile(p, []byte("dddd"), 0o644)
	e.w.read()
	if m := watchMaskOf(t, e, "d"); m&unix.IN_MODIFY != 0 {
		t.Errorf("mask %#x after the writer went and a new write, want no IN_MODIFY", m)
	}
}

// readWithWriter writes rel through a descriptor it keeps open and has
// a pass read it, which marks it as read while open for writing.
func readWithWriter(t *testing.T, f *fixture, e *Engine, rel string) *os.File {
	t.Helper()
	fd, err := os.OpenFile(filepath.Join(f.upper, rel), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fd.Close() })
	fd.WriteAt([]byte("bbbb"), 0)
	e.w.read()
	e.pass(false, false)
	dir, name := splitPath(rel)
	if !e.w.written[e.w.find(dir)][name] {
		t.Fatalf("%s not marked as read while open for writing", rel)
	}
	return fd
}

// TestQuietAfterWriterCloses: a file read while open for writing stops
// keeping its directory awake once its writer closed it, with no write
// after: the next pass asks again and finds no writer.
func TestQuietAfterWriterCloses(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.upper, "d"), 0o755)
	f.upperFile("d/f", "aaaa")
	e := passEngine(t, f)
	fd := readWithWriter(t, f, e, "d/f")
	fd.Close()
	e.w.read()
	e.pass(false, false)
	if m := e.w.written[e.w.find("d")]; len(m) != 0 {
		t.Errorf("written %v after its writer closed it, want none", m)
	}
	os.WriteFile(filepath.Join(f.upper, "d/g"), []byte("g"), 0o644)
	e.w.read()
	if m := watchMaskOf(t, e, "d"); m&unix.IN_MODIFY != 0 {
		t.Errorf("mask %#x after a write, want d quiet", m)
	}
}

// TestQuietWrittenMoved: a file read while open for writing and renamed
// into a quiet directory wakes it and keeps it awake.
func TestQuietWrittenMoved(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.upper, "d"), 0o755)
	os.MkdirAll(filepath.Join(f.upper, "d2"), 0o755)
	f.upperFile("d/f", "aaaa")
	e := passEngine(t, f)
	readWithWriter(t, f, e, "d/f")
	os.WriteFile(filepath.Join(f.upper, "d2/h"), []byte("h"), 0o644)
	e.w.read()
	if m := watchMaskOf(t, e, "d2"); m&unix.IN_MODIFY != 0 {
		t.Fatalf("mask %#x after a write, want d2 quiet", m)
	}
	if err := os.Rename(filepath.Join(f.upper, "d/f"), filepath.Join(f.upper, "d2/f")); err != nil {
		t.Fatal(err)
	}
	e.w.read()
	if m := watchMaskOf(t, e, "d2"); m&unix.IN_MODIFY == 0 {
		t.Errorf("mask %#x of d2 with a written file moved in, want IN_MODIFY", m)
	}
	if !e.w.written[e.w.find("d2")]["f"] || e.w.written[e.w.find("d")]["f"] {
		t.Errorf("written marks d %v, d2 %v: want f's moved to d2", e.w.written[e.w.find("d")], e.w.written[e.w.find("d2")])
	}
}

// TestSettleOnlyForMoves: changes made while a pass scanned are
// rescanned by it only if something moved; creates are left marked for
// the next pass, which finds them.
func TestSettleOnlyForMoves(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.upper, "a"), 0o755)
	os.MkdirAll(filepath.Join(f.upper, "b"), 0o755)
	e := passEngine(t, f)
	sc := newScan(e.o.Upper, e.st, e.w, map[string]bool{})
	sc.dir("", true)
	f.upperFile("a/created", "c") // as if while the scan ran
	if !e.settle(sc, map[string]bool{}) {
		t.Fatalf("settle with a create: not settled")
	}
	if sc.changed["a/created"] != nil || !e.w.pending() {
		t.Errorf("a create while scanning: rescanned now (%v) or not left for the next pass (pending %v)", sc.changed["a/created"] != nil, e.w.pending())
	}
	e.pass(false, false)
	f.wantHost("a/created", "c")
	sc = newScan(e.o.Upper, e.st, e.w, map[string]bool{})
	sc.dir("", true)
	if err := os.Rename(filepath.Join(f.upper, "a/created"), filepath.Join(f.upper, "b/moved")); err != nil {
		t.Fatal(err)
	}
	if !e.settle(sc, map[string]bool{}) {
		t.Fatalf("settle with a move: not settled")
	}
	if sc.changed["b/moved"] == nil || sc.changed["a/created"] != nil {
		t.Errorf("a move while scanning: b/moved seen %v, a/created still seen %v; want the rescan's view", sc.changed["b/moved"] != nil, sc.changed["a/created"] != nil)
	}
}

// TestSettleWakes: a write whose event a pass's settling reads, after
// the scan, quiets its directory, which the settling does not rescan
// (no move): the directory has IN_MODIFY back before the pass reads any
// data, and is left for the next pass.
func TestSettleWakes(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.upper, "d"), 0o755)
	f.upperFile("d/f", "a")
	e := passEngine(t, f)
	f.upperFile("d/f", "b")
	e.w.read()
	sc := newScan(e.o.Upper, e.st, e.w, map[string]bool{})
	sc.dir("", true)
	f.upperFile("d/f", "c") // as if while the scan ran
	e.settle(sc, map[string]bool{})
	if m := watchMaskOf(t, e, "d"); m&unix.IN_MODIFY == 0 {
		t.Errorf("mask %#x after settling: d quiet while the pass reads data", m)
	}
	if !e.w.pending() {
		t.Errorf("d not left for the next pass")
	}
	e.pass(false, false)
	f.wantHost("d/f", "c")
}

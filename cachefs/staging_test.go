package cachefs_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/internal/harness"
)

// stagingInodes lists the state directory's staging files by inode
// number, and how many of them hold data.
func stagingInodes(t *testing.T, state string) (inos []uint64, full int) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(state, "data"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(state, "data", e.Name()), &st); err != nil {
			t.Fatal(err)
		}
		if st.Size != 0 {
			full++
		}
		inos = append(inos, st.Ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	return inos, full
}

// spares waits until every staging file is an empty spare (the kernel
// releases closed files asynchronously) and returns their inodes.
func spares(t *testing.T, state string) []uint64 {
	t.Helper()
	var inos []uint64
	eventually(t, "staging files emptied", func() bool {
		var full int
		inos, full = stagingInodes(t, state)
		return full == 0
	})
	return inos
}

// missing returns the inodes of a not in b (both sorted).
func missing(a, b []uint64) []uint64 {
	var out []uint64
	for _, ino := range a {
		if i := sort.Search(len(b), func(i int) bool { return b[i] >= ino }); i == len(b) || b[i] != ino {
			out = append(out, ino)
		}
	}
	return out
}

// writeFiles writes n files named prefix0... with contents of their own
// while the write-back is held, so that each has a staging file, then
// writes them back.
func writeFiles(t *testing.T, env *harness.Env, prefix string, n int) {
	t.Helper()
	env.FS.HoldWriteback(true)
	for i := 0; i < n; i++ {
		p := filepath.Join(env.Mountpoint, fmt.Sprintf("%s%d", prefix, i))
		if err := os.WriteFile(p, []byte("contents of "+p), 0644); err != nil {
			t.Fatal(err)
		}
	}
	env.FS.HoldWriteback(false)
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %v", failed)
	}
}

// readyFull makes the staging files kept ready for creates all there.
func readyFull(t *testing.T, env *harness.Env) {
	t.Helper()
	env.FS.FillReady()
	if n := env.FS.Stats().Writeback.Ready; n != cachefs.ReadyTarget {
		t.Fatalf("%d staging files ready, want %d", n, cachefs.ReadyTarget)
	}
}

// Staging files are reused, never freed: rounds of creates after the
// first free no staging inode, and the staging files never outnumber
// what one round holds at once (30 files and the ready ones).
func TestStagingFilesReused(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	env := startDelegated(t, export, state)
	var rounds [][]uint64
	for _, prefix := range []string{"a", "b", "c"} {
		writeFiles(t, env, prefix, 30)
		readyFull(t, env)
		rounds = append(rounds, spares(t, state))
	}
	if n := len(rounds[0]); n < 30 || n > 30+cachefs.ReadyTarget {
		t.Fatalf("after 30 files written back: %d staging files, want 30 spares and up to %d ready", n, cachefs.ReadyTarget)
	}
	for i := 1; i < len(rounds); i++ {
		if gone := missing(rounds[i-1], rounds[i]); len(gone) > 0 {
			t.Errorf("staging inodes freed in round %d: %v", i+1, gone)
		}
	}
	if n := len(rounds[2]); n > 30+cachefs.ReadyTarget {
		t.Errorf("after three rounds of 30 files: %d staging files, want at most %d", n, 30+cachefs.ReadyTarget)
	}
	for _, prefix := range []string{"a", "b", "c"} {
		for i := 0; i < 30; i++ {
			name := fmt.Sprintf("%s%d", prefix, i)
			b, err := os.ReadFile(filepath.Join(export, name))
			if want := "contents of " + filepath.Join(env.Mountpoint, name); err != nil || string(b) != want {
				t.Errorf("host %s: %q, %v; want %q", name, b, err, want)
			}
		}
	}
}

// Two journaled writes of one file name one staging file; replayed after
// a crash in separate batches, the second must still send the contents
// (the first's completion once removed the file, and the second sent an
// empty one).
func TestReplayedWritesShareStaging(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	env1 := startDelegated(t, export, state)
	env1.FS.HoldWriteback(true)
	p := filepath.Join(env1.Mountpoint, "f")
	if err := os.WriteFile(p, []byte("first;"), 0644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 600; i++ { // more records than one batch takes
		if err := os.Mkdir(filepath.Join(env1.Mountpoint, fmt.Sprintf("d%d", i)), 0755); err != nil {
			t.Fatal(err)
		}
	}
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.Write([]byte("second"))
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	env1.FS.Crash()
	env1.Close()
	env2 := startDelegated(t, export, state) // replays the journal before mounting
	if failed := env2.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %v", failed)
	}
	if b, err := os.ReadFile(filepath.Join(export, "f")); err != nil || !bytes.Equal(b, []byte("first;second")) {
		t.Errorf("host f after replay: %q, %v; want %q", b, err, "first;second")
	}
	spares(t, state)
}

// Changes the host has are marked done in the journal, not replayed
// after a crash: their staging files may hold another file's data by
// then.
func TestJournalSkipsWrittenBack(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	env1 := startDelegated(t, export, state)
	writeFiles(t, env1, "a", 3)
	env1.FS.HoldWriteback(true)
	if err := os.Mkdir(filepath.Join(env1.Mountpoint, "d"), 0755); err != nil {
		t.Fatal(err)
	}
	crashAndReplay(t, env1, export, state, 1) // the mkdir
	if fi, err := os.Stat(filepath.Join(export, "d")); err != nil || !fi.IsDir() {
		t.Errorf("host d: %v, %v", fi, err)
	}
}

// crashAndReplay stops env's write-back as a killed daemon would, starts
// a new mount on the same state directory, writes back what it replays,
// and checks that it sent wantSent records.
func crashAndReplay(t *testing.T, env *harness.Env, export, state string, wantSent uint64) *harness.Env {
	t.Helper()
	env.FS.Crash()
	env.Close()
	env2 := startDelegated(t, export, state)
	if failed := env2.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back after the restart: %v", failed)
	}
	if st := env2.FS.Stats().Writeback; st.Sent != wantSent {
		t.Errorf("records sent after the restart: %d, want %d", st.Sent, wantSent)
	}
	return env2
}

// Creates take staging files made and opened ahead of them: once the
// ready ones are there, each create of a delegated file takes one, and
// its contents reach the host as written.
func TestCreatesTakeReadyStaging(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	env := startDelegated(t, export, state)
	if err := os.WriteFile(filepath.Join(env.Mountpoint, "first"), []byte("x"), 0644); err != nil {
		t.Fatal(err) // the first create asks for ready files
	}
	readyFull(t, env)
	before := env.FS.Stats().Writeback.ReadyCreates
	const n = cachefs.ReadyTarget / 2
	for i := 0; i < n; i++ {
		p := filepath.Join(env.Mountpoint, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(p, []byte(p), 0644); err != nil {
			t.Fatal(err)
		}
	}
	if got := env.FS.Stats().Writeback.ReadyCreates - before; got != n {
		t.Errorf("%d of %d creates took a ready staging file, want all", got, n)
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %v", failed)
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%d", i)
		b, err := os.ReadFile(filepath.Join(export, name))
		if want := filepath.Join(env.Mountpoint, name); err != nil || string(b) != want {
			t.Errorf("host %s: %q, %v; want %q", name, b, err, want)
		}
	}
}

package cachefs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/cachefs"
)

// journalLayout returns the journal's length and the offset of its
// first zero byte (its length if none).
func journalLayout(t *testing.T, state string) (size, lines int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return int64(len(b)), int64(i)
	}
	return int64(len(b)), int64(len(b))
}

func mkdirs(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.Mkdir(filepath.Join(root, n), 0755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJournalTornTail: the journal is copied into space allocated after
// its last line, so a crash leaves zeros there, and a crash mid-copy
// leaves a line without its newline too. The next daemon replays the
// whole lines, ignores the rest, and appends its own records where the
// whole lines end, where the daemon after it finds them.
func TestJournalTornTail(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	env1 := startDelegated(t, export, state)
	env1.FS.HoldWriteback(true)
	mkdirs(t, env1.Mountpoint, "a")
	env1.FS.Crash()
	env1.Close()
	size, lines := journalLayout(t, state)
	if lines == 0 || size <= lines {
		t.Fatalf("journal: %d bytes, lines end at %d; want lines followed by allocated zeros", size, lines)
	}
	// A whole record but for its newline: the mkdir of a, renamed.
	b, _ := os.ReadFile(filepath.Join(state, "journal"))
	first, _, _ := bytes.Cut(b, []byte("\n"))
	torn := bytes.Replace(first, []byte(`"Path":"a"`), []byte(`"Path":"torn"`), 1)
	if bytes.Equal(torn, first) {
		t.Fatalf("first journal line %q has no path a", first)
	}
	f, err := os.OpenFile(filepath.Join(state, "journal"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(torn, lines); err != nil {
		t.Fatal(err)
	}
	f.Close()

	env2 := startDelegated(t, export, state) // replays a
	env2.FS.HoldWriteback(true)
	mkdirs(t, env2.Mountpoint, "b")
	env2.FS.Crash()
	env2.Close()
	if _, after := journalLayout(t, state); after <= lines {
		t.Fatalf("journal lines end at %d after the second daemon, want past %d", after, lines)
	}

	env3 := startDelegated(t, export, state) // replays a and b
	if failed := env3.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %v", failed)
	}
	for _, n := range []string{"a", "b"} {
		if fi, err := os.Stat(filepath.Join(export, n)); err != nil || !fi.IsDir() {
			t.Errorf("host %s: %v, %v; want a directory", n, fi, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(export, "torn")); err == nil {
		t.Error("the torn record was replayed")
	}
}

// journalRecords counts the records (not markers) in the journal's
// whole lines.
func journalRecords(t *testing.T, state string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) > 0 && !bytes.HasPrefix(line, []byte(`{"Done":`)) {
			n++
		}
	}
	return n
}

func dirNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// TestJournalCompacted: compacting keeps exactly the records that wait,
// changes after it are journaled in the new file, and a daemon killed
// after it replays both and nothing the host had.
func TestJournalCompacted(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	env1 := startDelegated(t, export, state)
	mkdirs(t, env1.Mountpoint, dirNames("a", 50)...)
	if failed := env1.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %v", failed)
	}
	env1.FS.HoldWriteback(true)
	mkdirs(t, env1.Mountpoint, dirNames("b", 10)...)
	if n := journalRecords(t, state); n != 60 {
		t.Fatalf("journal holds %d records before compacting, want 60 (the host has 50)", n)
	}
	if err := env1.FS.CompactJournal(); err != nil {
		t.Fatalf("CompactJournal: %v", err)
	}
	if n := journalRecords(t, state); n != 10 {
		t.Errorf("journal holds %d records after compacting, want the 10 that wait", n)
	}
	mkdirs(t, env1.Mountpoint, dirNames("c", 5)...)
	crashAndReplay(t, env1, export, state, 15)
	for _, n := range append(append(dirNames("a", 50), dirNames("b", 10)...), dirNames("c", 5)...) {
		if fi, err := os.Stat(filepath.Join(export, n)); err != nil || !fi.IsDir() {
			t.Errorf("host %s: %v, %v; want a directory", n, fi, err)
		}
	}
}

// TestJournalCompactedWhileRecordsWait: past the compaction length the
// journal is compacted after a batch although records still wait, so a
// queue that never drains does not grow it without end.
func TestJournalCompactedWhileRecordsWait(t *testing.T) {
	old := cachefs.SetJournalCompact(4096)
	t.Cleanup(func() { cachefs.SetJournalCompact(old) })
	export, state := t.TempDir(), t.TempDir()
	env := startDelegated(t, export, state)
	env.FS.HoldWriteback(true)
	mkdirs(t, env.Mountpoint, dirNames("d", 600)...) // more than one batch
	_, held := journalLayout(t, state)
	env.FS.HoldWriteback(false)
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %v", failed)
	}
	if _, after := journalLayout(t, state); after >= held/2 {
		t.Errorf("journal lines: %d bytes after the write-back, %d before; want it compacted to what waited after the first batch", after, held)
	}
}

// TestJournalRewriteCrash: writing the journal anew (after a failed
// append) keeps a whole journal at every point a crash could stop it,
// the new file written a piece at a time: a daemon started on the state
// directory as it was at any of them replays exactly the records that
// waited, and none the host had.
func TestJournalRewriteCrash(t *testing.T) {
	old := cachefs.SetJournalPiece(1) // a write per record
	t.Cleanup(func() { cachefs.SetJournalPiece(old) })
	export, state := t.TempDir(), t.TempDir()
	env := startDelegated(t, export, state)
	mkdirs(t, env.Mountpoint, dirNames("a", 20)...)
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %v", failed)
	}
	env.FS.HoldWriteback(true)
	waiting := dirNames("b", 5)
	mkdirs(t, env.Mountpoint, waiting...)

	var crashes []string // copies of the state directory at each crash point
	env.FS.SetJournalCrashHook(func() { crashes = append(crashes, copyState(t, state)) })
	env.FS.RewriteJournal()
	env.FS.SetJournalCrashHook(nil)
	env.FS.Crash()
	if len(crashes) < len(waiting) {
		t.Fatalf("%d crash points, want one at least per waiting record (%d)", len(crashes), len(waiting))
	}
	if n := journalRecords(t, state); n != len(waiting) {
		t.Errorf("journal holds %d records after the rewrite, want the %d that wait", n, len(waiting))
	}
	for i, crashed := range crashes {
		host := t.TempDir() // as the host was at the crash
		mkdirs(t, host, dirNames("a", 20)...)
		env2 := startDelegated(t, host, crashed) // replays the journal before mounting
		if failed := env2.FS.WriteBack(); len(failed) > 0 {
			t.Errorf("crash point %d: write-back after the restart: %v", i, failed)
		}
		if st := env2.FS.Stats().Writeback; st.Sent != uint64(len(waiting)) {
			t.Errorf("crash point %d: records sent after the restart: %d, want %d", i, st.Sent, len(waiting))
		}
		env2.Close()
		for _, n := range waiting {
			if _, err := os.Stat(filepath.Join(host, n)); err != nil {
				t.Errorf("crash point %d: waiting record lost: host %s: %v", i, n, err)
			}
		}
	}
}

// copyState copies the journal files of the state directory to a new
// one, as a crash of the daemon would leave them, and returns it.
func copyState(t *testing.T, state string) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range []string{"journal", "journal.new"} {
		b, err := os.ReadFile(filepath.Join(state, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatalf("ReadFile: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0600); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
	}
	return dst
}

// Names are bytes, not text: a name that is not UTF-8 (a Latin-1 é, a
// lone continuation byte) or holds quotes, backslashes and control
// characters is journaled and replayed after a crash as it was, for a
// file, a directory and a symlink's target.
func TestJournalNamesAreBytes(t *testing.T) {
	export, state := t.TempDir(), t.TempDir()
	env := startDelegated(t, export, state)
	env.FS.HoldWriteback(true)
	names := []string{"caf\xe9", "\x80lone", "q\"uote\\back\x01\x1f\t", "ok-ünïcode"}
	for _, name := range names {
		if err := os.Mkdir(filepath.Join(env.Mountpoint, "d"+name), 0755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(env.Mountpoint, "d"+name, name), []byte(name), 0644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("t"+name, filepath.Join(env.Mountpoint, "l"+name)); err != nil {
			t.Fatal(err)
		}
	}
	crashAndReplay(t, env, export, state, uint64(4*len(names)))
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(export, "d"+name, name))
		if err != nil || string(b) != name {
			t.Errorf("host file %q: %q, %v; want its name as contents", "d"+name+"/"+name, b, err)
		}
		if target, err := os.Readlink(filepath.Join(export, "l"+name)); err != nil || target != "t"+name {
			t.Errorf("host symlink %q: %q, %v; want %q", "l"+name, target, err, "t"+name)
		}
	}
}

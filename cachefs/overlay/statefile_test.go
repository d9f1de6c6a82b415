package overlay

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// dump lists a state's records, for comparisons.
func dump(s *hostState) []string {
	var out []string
	s.walk(s.root, func(n *hnode) { out = append(out, n.path()+" "+recordFields(&n.rec)) })
	slices.Sort(out)
	return out
}

func mustLoad(t *testing.T, path string) (*hostState, *stateFile) {
	t.Helper()
	s, f, err := loadState(path)
	if err != nil {
		t.Fatalf("loadState: %v", err)
	}
	t.Cleanup(f.close)
	return s, f
}

// TestStateLog: changes logged pass by pass replay to the same state;
// a compaction writes a snapshot of the next generation, and a log of
// an older generation (a crash before the new log replaced it) is not
// replayed on it.
func TestStateLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	s, f := mustLoad(t, path)
	s.set("a", record{Kind: kDir, Ino: 1})
	s.set("a/x", record{Kind: kFile, Ino: 2, Data: true, Origin: "lower x"})
	s.set("b", record{Kind: kDir, Ino: 3})
	s.move(s.find("a"), "b/a2")
	s.move(s.find("b/a2/x"), ".cachefs-move-2")
	s.move(s.find(".cachefs-move-2"), "c")
	s.remove(s.find("b"))
	s.set("d/e", record{Kind: kFile, Ino: 4})
	s.poison(s.find("d"))
	if _, err := f.save(s); err != nil {
		t.Fatalf("save: %v", err)
	}
	want := dump(s)
	s2, f2 := mustLoad(t, path)
	if got := dump(s2); !slices.Equal(got, want) {
		t.Fatalf("replayed %q, want %q", got, want)
	}
	if s2.hostOf("lower x/y") != "c/y" {
		t.Errorf("hostOf after replay: %q", s2.hostOf("lower x/y"))
	}
	for i := 0; i < 12000; i++ {
		s2.set(fmt.Sprintf("f%d", i%10), record{Kind: kFile, Ino: uint64(100 + i)})
	}
	if _, err := f2.save(s2); err != nil || f2.gen != 1 || f2.logLines != 0 {
		t.Fatalf("save: %v, generation %d, log lines %d: want a compaction", err, f2.gen, f2.logLines)
	}
	s2.set("late", record{Kind: kFile, Ino: 9})
	f2.save(s2)
	want2 := dump(s2)
	if got := dump(mustLoadState(t, path)); !slices.Equal(got, want2) {
		t.Fatalf("after compaction and a log: %q, want %q", got, want2)
	}
	// A crash after the next snapshot (written as compact writes it),
	// before its log replaced the old one (which makes "late"): the old
	// log is not replayed on it.
	s2.remove(s2.find("late"))
	want3 := dump(s2)
	if err := writeSnapshot(path, s2, f2.gen+1); err != nil {
		t.Fatal(err)
	}
	if got := dump(mustLoadState(t, path)); !slices.Equal(got, want3) {
		t.Fatalf("snapshot with a stale log: %q, want %q", got, want3)
	}
}

func mustLoadState(t *testing.T, path string) *hostState {
	s, _ := mustLoad(t, path)
	return s
}

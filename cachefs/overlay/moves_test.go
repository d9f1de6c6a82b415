package overlay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMovedDirLosesGoneEntries: a file removed from a directory that is
// then renamed is gone from the host when the flush returns. The pass
// that moves the directory compared its entries with no records (they
// were at its old path) and carried the removed file's record along:
// the host kept the file until some later pass looked there.
func TestMovedDirLosesGoneEntries(t *testing.T) {
	f := newFixture(t)
	f.upperFile("d1/x", "x")
	f.upperFile("d1/y", "y")
	f.flush()
	os.Remove(filepath.Join(f.upper, "d1/x"))
	os.Rename(filepath.Join(f.upper, "d1"), filepath.Join(f.upper, "d2"))
	f.flush()
	f.wantHost("d2/x", "-")
	f.wantHost("d2/y", "y")
	f.wantHost("d1", "-")
}

// TestRescanDropsMovedSubtree: a directory moved into a scanned
// directory and back out while the scan ran was noted, with what is in
// it, under the path it left; the rescan of that directory drops all of
// it, not only its direct entries.
func TestRescanDropsMovedSubtree(t *testing.T) {
	f := newFixture(t)
	f.upperFile("a/d1/x", "x")
	os.Mkdir(filepath.Join(f.upper, "b"), 0o755)
	f.flush()
	f.eng.Close()
	st, sf, err := loadState(f.state)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.close()
	sc := newScan(f.upper, st, nil, map[string]bool{})
	os.Rename(filepath.Join(f.upper, "a/d1"), filepath.Join(f.upper, "b/moved"))
	sc.dir("b", false)
	os.Rename(filepath.Join(f.upper, "b/moved"), filepath.Join(f.upper, "a/d1"))
	sc.rescan("b")
	for p := range sc.changed {
		if strings.HasPrefix(p, "b/moved") {
			t.Errorf("after the rescan of b, %s is still noted changed", p)
		}
	}
}

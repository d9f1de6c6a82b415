package cachefs_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOverlayStressThenCompare is TestDelegatedStressThenCompare on a
// delegated subtree served by an overlay (Options.Overlays), the way
// `cachefsd` serves delegated subtrees by default: the goroutines'
// changes land in the upper directory while the write-back runs, then
// everything is written back and CompareTrees finds no difference.
// Hard links are on (CACHEFS_STRESS_HARDLINKS=0: off). Before its fixes
// most runs of 1,000 ops (CACHEFS_STRESS_OPS) found differences: a
// symlink's old target kept (an inode number reused), files kept on the
// host after a directory they left moved, a file lost when its directory
// was moved out and back during a scan, a name kept by a rename between
// two links of one file.
func TestOverlayStressThenCompare(t *testing.T) {
	seed, ops := exerciserSeed(t), envInt(t, "CACHEFS_STRESS_OPS", 120)
	links := os.Getenv("CACHEFS_STRESS_HARDLINKS") != "0"
	export := t.TempDir()
	env, root := ovlSubtree(t, export)
	stressWriters(t, root, seed, ops, links)
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Errorf("write-back: %+v", failed)
	}
	diffs, err := CompareTrees(root, filepath.Join(export, "ovl"))
	if err != nil {
		t.Fatalf("CompareTrees: %v", err)
	}
	for _, d := range diffs {
		t.Errorf("guest and host differ: %s", d)
	}
	if st := env.FS.Stats().Overlays; len(st) != 1 || st[0].Quieted == 0 {
		t.Errorf("overlay stats %+v: want one overlay whose writes made directories quiet", st)
	}
}

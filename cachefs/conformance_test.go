package cachefs_test

import (
	"os"
	"slices"
	"testing"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/internal/posixtest"
)

// knownBugs are suite tests that fail on the mount for a cachefs bug
// not yet fixed, by name, with the reason. They still run on the plain
// directory, and on the mount too with CACHEFS_CONFORMANCE_NOSKIP=1.
var knownBugs = map[string]string{
	"GetLkToEOF":       "GetLk passes the protocol's EOF end (^0) to the kernel, which wants OFFSET_MAX: EIO",
	"ProcessLockClose": "Flush unlocks only through handles that took locks, not at every close",
	"RenameExchange":   "flaky: the inotify actuator replays the guest's own renames as local renames",
}

// TestConformance runs the POSIX suite against a plain directory, the
// baseline, and against a mount in each consistency mode.
func TestConformance(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		runSuite(t, nil, func(t *testing.T) string { return t.TempDir() })
	})
	for _, m := range []consistency.Mode{consistency.Consistent, consistency.Cached, consistency.Delegated} {
		t.Run(m.String(), func(t *testing.T) {
			mnt := t.TempDir()
			env := harness.Start(t, harness.Options{Mountpoint: mnt})
			env.FS.Register("", m)
			runSuite(t, knownBugs, func(t *testing.T) string {
				d, err := os.MkdirTemp(mnt, "t")
				if err != nil {
					t.Fatalf("MkdirTemp: %v", err)
				}
				return d
			})
		})
	}
}

// runSuite runs each test, in name order, in a fresh directory from
// newDir, skipping those in skip.
func runSuite(t *testing.T, skip map[string]string, newDir func(*testing.T) string) {
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if why, ok := skip[name]; ok && os.Getenv("CACHEFS_CONFORMANCE_NOSKIP") == "" {
				t.Skip("cachefs bug: " + why)
			}
			posixtest.All[name](t, newDir(t))
		})
	}
}

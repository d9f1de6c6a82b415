package cachefs_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/internal/posixtest"
	"golang.org/x/sys/unix"
)

// knownBugs are suite tests that fail on the mount for a cachefs bug
// not yet fixed, by name (every mode) or mode/name, with the reason.
// They still run on the plain directory, and on the mount too with
// CACHEFS_CONFORMANCE_NOSKIP=1.
// A name "concurrent/name" leaves it out of TestConformanceConcurrent only.
var knownBugs = map[string]string{}

// notServed are suite tests of what a mount leaves out by choice, by
// mode/name, with what: they are skipped there.
var notServed = map[string]string{
	"conn-cached-noxattr/Xattr":       "xattrs are off (TestCachedConnNoXattrsRefuses checks the errors)",
	"conn-cached-noxattr/XattrErrors": "xattrs are off (TestCachedConnNoXattrsRefuses checks the errors)",
}

// hangLimit is how long one test may take on the mount before the
// watchdog aborts the FUSE connection.
const hangLimit = 3 * time.Minute

// TestConformance runs the POSIX suite against a plain directory, the
// baseline, and against a mount in each consistency mode.
func TestConformance(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		runSuite(t, func(t *testing.T, _ string) string { return t.TempDir() })
	})
	for _, m := range []consistency.Mode{consistency.Consistent, consistency.Cached, consistency.Delegated} {
		t.Run(m.String(), func(t *testing.T) {
			mnt := t.TempDir()
			env := harness.Start(t, harness.Options{Mountpoint: mnt})
			runModeSuite(t, env, m)
		})
	}
}

// TestConformanceConnections runs the suite on each mode's own kernel
// connection: the mount's root registered through the Guest, which binds
// that mode's view over it.
func TestConformanceConnections(t *testing.T) {
	for _, m := range []consistency.Mode{consistency.Cached, consistency.Consistent} {
		t.Run(m.String(), func(t *testing.T) {
			env := harness.Start(t, harness.Options{})
			if _, err := env.Guest.Register("", m); err != nil {
				t.Fatalf("Register: %v", err)
			}
			runSuiteIn(t, env.Mountpoint, "conn-"+m.String())
		})
	}
	t.Run("cached-noxattr", func(t *testing.T) {
		env := harness.Start(t, harness.Options{NoCachedXattrs: true})
		if _, err := env.Guest.Register("", consistency.Cached); err != nil {
			t.Fatalf("Register: %v", err)
		}
		runSuiteIn(t, env.Mountpoint, "conn-cached-noxattr")
	})
}

// runModeSuite runs the suite under env's mount with its root in mode m,
// each test in a directory of its own.
func runModeSuite(t *testing.T, env *harness.Env, m consistency.Mode) {
	env.FS.Register("", m)
	runSuiteIn(t, env.Mountpoint, m.String())
}

// runSuiteIn runs the suite under mnt, the knownBugs of mode applying.
func runSuiteIn(t *testing.T, mnt, mode string) {
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		t.Fatalf("Stat mountpoint: %v", err)
	}
	runSuite(t, func(t *testing.T, name string) string {
		if why, ok := knownBug(mode, name); ok {
			t.Skip("cachefs bug: " + why)
		}
		if why, ok := notServed[mode+"/"+name]; ok {
			t.Skip(why)
		}
		watchdog(t, st.Dev)
		d, err := os.MkdirTemp(mnt, "t")
		if err != nil {
			t.Fatalf("MkdirTemp: %v", err)
		}
		return d
	})
}

// runSuite runs each test, in name order, in a fresh directory from
// newDir.
func runSuite(t *testing.T, newDir func(t *testing.T, name string) string) {
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) { posixtest.All[name](t, newDir(t, name)) })
	}
}

// knownBug looks up a test of a mode in knownBugs.
func knownBug(mode, name string) (string, bool) {
	if os.Getenv("CACHEFS_CONFORMANCE_NOSKIP") != "" {
		return "", false
	}
	if why, ok := knownBugs[name]; ok {
		return why, true
	}
	why, ok := knownBugs[mode+"/"+name]
	return why, ok
}

// watchdog fails a test still running after hangLimit and aborts the
// FUSE connection of device dev, so that calls blocked on the mount
// return ENOTCONN: a hung mount would otherwise hang the test binary,
// and its exit too.
func watchdog(t *testing.T, dev uint64) {
	timer := time.AfterFunc(hangLimit, func() {
		t.Errorf("still running after %v: aborting the FUSE connection", hangLimit)
		if err := abortFUSE(dev); err != nil {
			t.Errorf("abort: %v", err)
		}
	})
	t.Cleanup(func() { timer.Stop() })
}

// abortFUSE aborts a FUSE connection through the fusectl filesystem,
// mounting it if needed.
func abortFUSE(dev uint64) error {
	const ctl = "/sys/fs/fuse/connections"
	abort := fmt.Sprintf("%s/%d/abort", ctl, unix.Minor(dev))
	if _, err := os.Stat(abort); err != nil {
		unix.Mount("fusectl", ctl, "fusectl", 0, "")
	}
	return os.WriteFile(abort, []byte("1"), 0)
}

package cachefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachefs/cachefs/cachefs"
)

// TestDelegatedOpenFilesBoundFDs holds 600 files of a delegated subtree
// open, written (through passthrough or the daemon) and read back: the
// daemon's descriptors of staging files stay bounded (a cache of them
// and the ready files), where it held one per open file.
func TestDelegatedOpenFilesBoundFDs(t *testing.T) {
	const held = 600
	state := t.TempDir()
	env := startDelegated(t, t.TempDir(), state)
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i := range held {
		f, err := os.OpenFile(filepath.Join(env.Mountpoint, fmt.Sprintf("f%03d", i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		files = append(files, f)
		if _, err := f.WriteString(fmt.Sprint(i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if n, max := fdsUnder(t, state), cachefs.StagingFDMax+cachefs.ReadyTarget+8; n > max {
		t.Errorf("%d descriptors open in the state directory with %d files held open, want at most %d", n, held, max)
	}
	for i, f := range files {
		b := make([]byte, 8)
		if n, _ := f.ReadAt(b, 0); string(b[:n]) != fmt.Sprint(i) {
			t.Errorf("file %d reads %q", i, b[:n])
		}
	}
}

// fdsUnder counts this process's descriptors of files under dir.
func fdsUnder(t *testing.T, dir string) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if p, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(p, dir+"/") {
			n++
		}
	}
	return n
}

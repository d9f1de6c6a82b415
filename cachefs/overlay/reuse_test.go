package overlay

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInodeReused: a symlink is removed and made again with another
// target between two passes, and the upper file system (ext4 does, at
// once) gives the new one the freed inode number: the host gets the new
// target, where the symlink was taken for the old one, changed in place.
func TestInodeReused(t *testing.T) {
	f := newFixture(t)
	up := func(rel string) string { return filepath.Join(f.upper, rel) }
	os.Symlink("old-target", up("s"))
	f.flush()
	var before, after unix.Stat_t
	reused := false
	for i := 0; i < 20 && !reused; i++ { // a new inode is often the one just freed
		if i > 0 {
			f.flush() // the host has the symlink there is now
		}
		unix.Lstat(up("s"), &before)
		os.Remove(up("s"))
		os.Symlink(fmt.Sprint("target-", i), up("s"))
		unix.Lstat(up("s"), &after)
		reused = after.Ino == before.Ino
	}
	if !reused {
		t.Skipf("the upper file system gave the symlink a new inode number (%d, was %d)", after.Ino, before.Ino)
	}
	f.flush()
	want, _ := os.Readlink(up("s"))
	if got, _ := os.Readlink(filepath.Join(f.h.export, "s")); got != want {
		t.Errorf("host s -> %q, want %q", got, want)
	}
}

// TestStateBtime: a record's birth time is saved and loaded; a line
// written before birth times were kept loads with none.
func TestStateBtime(t *testing.T) {
	r := record{Kind: kFile, Ino: 7, Btime: 1_700_000_000_123456789, Ctime: 3, Size: 4, Mtime: 5, Data: true, Origin: "a b"}
	line := `"p q" ` + recordFields(&r)
	p, got, err := parseRecord(line)
	if err != nil || p != "p q" || got != r {
		t.Errorf("parseRecord(%q) = %q %+v %v, want %+v", line, p, got, err, r)
	}
	old := `"p" 1 7 3 4 5 1 "a b"`
	_, got, err = parseRecord(old)
	if err != nil || got.Btime != 0 || got.Ino != 7 || got.Origin != "a b" {
		t.Errorf("parseRecord(%q) = %+v %v, want no birth time", old, got, err)
	}
	if _, _, err := parseRecord(`"p" 1 7 3 4 5 1 x "a"`); err == nil || !strings.Contains(err.Error(), "bad line") {
		t.Errorf("a bad birth time: %v, want an error", err)
	}
}

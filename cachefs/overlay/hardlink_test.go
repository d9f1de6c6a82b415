package overlay

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// TestHardLinkSequences: a file with hard links made, written to,
// unlinked under its first name and linked into a new directory, with
// passes between any of the steps: the host ends with one file under
// the names the guest has. (Two names of the file moved from one record
// in one pass each took the record; the second moved the first away.)
func TestHardLinkSequences(t *testing.T) {
	steps := []func(f *fixture){
		func(f *fixture) { f.upperFile("a", "") },
		func(f *fixture) { f.upperFile("a", "one") },
		func(f *fixture) { os.Link(filepath.Join(f.upper, "a"), filepath.Join(f.upper, "b")) },
		func(f *fixture) {
			fd, _ := os.OpenFile(filepath.Join(f.upper, "b"), os.O_WRONLY|os.O_APPEND, 0)
			fd.Write([]byte("two"))
			fd.Close()
		},
		func(f *fixture) { os.Mkdir(filepath.Join(f.upper, "d"), 0o755) },
		func(f *fixture) { os.Remove(filepath.Join(f.upper, "a")) },
		func(f *fixture) { os.Link(filepath.Join(f.upper, "b"), filepath.Join(f.upper, "d/c")) },
	}
	for mask := 0; mask < 1<<(len(steps)+1); mask++ {
		f := newFixture(t)
		watch := mask&(1<<len(steps)) != 0
		if watch {
			f.start(true) // the watcher's marks choose what each pass scans
		}
		for i, s := range steps {
			s(f)
			if mask&(1<<i) != 0 {
				f.flush()
			}
		}
		f.flush()
		var b, c unix.Stat_t
		unix.Lstat(filepath.Join(f.h.export, "b"), &b)
		unix.Lstat(filepath.Join(f.h.export, "d/c"), &c)
		if b.Ino != c.Ino || b.Ino == 0 {
			t.Errorf("passes after steps %07b (watching: %v): host b is inode %d, d/c %d; want one file", mask&(1<<len(steps)-1), watch, b.Ino, c.Ino)
		}
		f.wantHost("d/c", "onetwo")
		f.wantHost("a", "-")
		f.eng.Close()
	}
}

// TestSymlinkHardLink: a hard link of a symlink (linkat without
// AT_SYMLINK_FOLLOW) is a link on the host too, written back with its
// symlink or after it.
func TestSymlinkHardLink(t *testing.T) {
	for _, between := range []bool{false, true} {
		f := newFixture(t)
		os.Symlink("target", filepath.Join(f.upper, "s"))
		if between {
			f.flush()
		}
		if err := unix.Linkat(unix.AT_FDCWD, filepath.Join(f.upper, "s"), unix.AT_FDCWD, filepath.Join(f.upper, "s2"), 0); err != nil {
			t.Fatalf("linkat: %v", err)
		}
		f.flush()
		var a, b unix.Stat_t
		unix.Lstat(filepath.Join(f.h.export, "s"), &a)
		unix.Lstat(filepath.Join(f.h.export, "s2"), &b)
		if a.Ino != b.Ino || a.Ino == 0 || a.Mode&unix.S_IFMT != unix.S_IFLNK {
			t.Errorf("pass between: %v: host s is inode %d mode %o, s2 %d; want one symlink", between, a.Ino, a.Mode, b.Ino)
		}
		f.eng.Close()
	}
}

// TestLinkOfUnreadFile: a file's data cannot be read when its pass is
// sent (its name went since the scan); the new name linked to it in
// the same pass must not be recorded as holding the data: the next
// pass sends it.
func TestLinkOfUnreadFile(t *testing.T) {
	f := newFixture(t)
	f.upperFile("a", "data")
	os.Link(filepath.Join(f.upper, "a"), filepath.Join(f.upper, "b"))
	st, sf, err := loadState(f.state)
	if err != nil {
		t.Fatal(err)
	}
	sc := newScan(f.upper, st, nil, map[string]bool{})
	sc.root()
	sc.dir("", true)
	groups := newPlanner(sc, "", nil, false).plan()
	os.Remove(filepath.Join(f.upper, "a"))
	out := sendGroups(context.Background(), f.upper, f.h.send, groups)
	if !out.retry {
		t.Errorf("a pass whose data could not be read does not ask to be made again")
	}
	if _, err := sf.save(st); err != nil {
		t.Fatal(err)
	}
	sf.close()
	e, err := newEngine(Options{Upper: f.upper, State: f.state, Send: f.h.send, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer e.closeFDs()
	e.ctx = context.Background()
	e.pass(true, false) // with write hints (none came): as a running engine's
	f.wantHost("b", "data")
	f.wantHost("a", "-")
}

// TestLinkDuringScan: a file is linked into another directory between
// the scans of its two directories in one pass, so the scan saw its
// first name with one link and the new name with two. The host must end
// with one file under both names (they were written back as two files,
// and no later pass joined them: each name's record matched its inode).
func TestLinkDuringScan(t *testing.T) {
	f := newFixture(t)
	os.Mkdir(filepath.Join(f.upper, "a"), 0o755)
	os.Mkdir(filepath.Join(f.upper, "d"), 0o755)
	f.flush() // a and d on the host, recorded: scanned only when marked
	f.eng.Close()
	f.upperFile("a/src", "x")
	st, sf, err := loadState(f.state)
	if err != nil {
		t.Fatal(err)
	}
	sc := newScan(f.upper, st, nil, map[string]bool{})
	sc.dir("a", false) // a/src, with one link
	if err := os.Link(filepath.Join(f.upper, "a/src"), filepath.Join(f.upper, "d/l")); err != nil {
		t.Fatal(err)
	}
	sc.dir("d", false) // d/l, with two
	groups := newPlanner(sc, "", nil, false).plan()
	if out := sendGroups(context.Background(), f.upper, f.h.send, groups); out.err != nil || len(out.failed) > 0 {
		t.Fatalf("send: %v %+v", out.err, out.failed)
	}
	if _, err := sf.save(st); err != nil {
		t.Fatal(err)
	}
	sf.close()
	f.start(false)
	f.flush()
	var a, b unix.Stat_t
	unix.Lstat(filepath.Join(f.h.export, "a/src"), &a)
	unix.Lstat(filepath.Join(f.h.export, "d/l"), &b)
	if a.Ino != b.Ino || a.Ino == 0 {
		t.Errorf("host a/src is inode %d, d/l %d; want one file", a.Ino, b.Ino)
	}
	f.wantHost("d/l", "x")
}

// TestParkNameRefused: a file or directory of the guest's named like a
// park name is not written back (the write-back would take it for a
// parked object, and the host hides such names): flush reports it with
// EPERM and writes the rest.
func TestParkNameRefused(t *testing.T) {
	f := newFixture(t)
	park := upstream.ParkPrefix + "1"
	f.upperFile(park, "mine")
	f.upperFile("d/"+park+"/x", "mine too")
	f.upperFile("d/ok", "ok")
	f.start(false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	failed, err := f.eng.Flush(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]syscall.Errno{}
	for _, fl := range failed {
		got[fl.Path] = fl.Errno
	}
	for _, p := range []string{park, "d/" + park, "d/" + park + "/x"} {
		if got[p] != syscall.EPERM {
			t.Errorf("flush failures %+v: want %s refused with EPERM", failed, p)
		}
	}
	f.wantHost("d/ok", "ok")
	f.wantHost(park, "-")
	f.wantHost("d/"+park, "-")
}

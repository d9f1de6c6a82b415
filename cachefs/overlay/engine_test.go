package overlay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// TestNewTree writes back a tree made only in the upper directory, then
// sends nothing more once it is on the host, also after a restart.
func TestNewTree(t *testing.T) {
	f := newFixture(t)
	f.upperFile("a/b/file", "data")
	f.upperFile("top", "top")
	os.Symlink("a/b/file", filepath.Join(f.upper, "link"))
	os.Link(filepath.Join(f.upper, "top"), filepath.Join(f.upper, "a/hard"))
	unix.Mkfifo(filepath.Join(f.upper, "fifo"), 0o640)
	os.Chmod(filepath.Join(f.upper, "a/b/file"), 0o600)
	f.mark("a/b/file", "user.x", "1")
	ops := f.flush()
	f.wantHost("a/b/file", "data")
	f.wantHost("top", "top")
	f.wantHost("a/hard", "top")
	if target, _ := os.Readlink(filepath.Join(f.h.export, "link")); target != "a/b/file" {
		t.Errorf("link -> %q", target)
	}
	var a, b unix.Stat_t
	unix.Lstat(filepath.Join(f.h.export, "top"), &a)
	unix.Lstat(filepath.Join(f.h.export, "a/hard"), &b)
	if a.Ino != b.Ino {
		t.Errorf("top and a/hard are not one file on the host")
	}
	if fi, _ := os.Lstat(filepath.Join(f.h.export, "a/b/file")); fi == nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a/b/file mode %v, want 0600", fi)
	}
	if v, _ := getXattr(filepath.Join(f.h.export, "a/b/file"), "user.x"); string(v) != "1" {
		t.Errorf("user.x = %q", v)
	}
	if n := count(ops, upstream.WBWrite); n != 2 {
		t.Errorf("%d writes, want 2 (file and top; the hard link is a link)", n)
	}
	if ops := f.flush(); len(ops) != 0 {
		t.Errorf("second flush sent %d ops: %+v", len(ops), ops)
	}
	f.restart()
	if ops := f.flush(); len(ops) != 0 {
		t.Errorf("flush after a restart sent %d ops: %+v", len(ops), ops)
	}
}

// TestWhiteoutsAndOpaque: a whiteout removes the host's file or tree;
// an opaque directory replaces the host's directory of the same path.
func TestWhiteoutsAndOpaque(t *testing.T) {
	f := newFixture(t)
	f.hostFile("gone/deep/x", "x")
	f.hostFile("file", "f")
	f.hostFile("opq/old", "old")
	f.whiteout("gone")
	f.whiteout("file")
	f.upperFile("opq/new", "new")
	f.mark("opq", xattrOpaque, "y")
	ops := f.flush()
	f.wantHost("gone", "-")
	f.wantHost("file", "-")
	f.wantHost("opq/old", "-")
	f.wantHost("opq/new", "new")
	if n := count(ops, upstream.WBRemoveTree); n != 3 {
		t.Errorf("%d removals, want 3: %+v", n, ops)
	}
	// A whiteout new in a later pass (overlayfs links them all to one
	// inode, whose ctime changes) sends only its own removal.
	f.hostFile("later", "l")
	f.whiteout("later")
	if ops := f.flush(); len(ops) != 1 || ops[0].Kind != upstream.WBRemoveTree || ops[0].Path != "later" {
		t.Errorf("ops %+v, want the removal of later alone", ops)
	}
	f.wantHost("later", "-")
	f.wantHost("opq/new", "new")
}

// TestRedirectedDirectory: a lower directory overlayfs renamed (redirect
// xattr, whiteout at the old name) is renamed on the host, its files not
// sent; a relative redirect inside it names a file of the lower
// directory.
func TestRedirectedDirectory(t *testing.T) {
	f := newFixture(t)
	f.hostFile("d1/f", "f")
	f.hostFile("d1/sub/s", "s")
	f.hostFile("d1/g", "g")
	os.Mkdir(filepath.Join(f.upper, "d2"), 0o755)
	f.mark("d2", xattrRedirect, "d1")
	f.whiteout("d1")
	f.upperFile("d2/new", "new")
	f.upperFile("d2/g2", "")
	f.mark("d2/g2", xattrRedirect, "g")
	f.mark("d2/g2", xattrMetacopy, "")
	f.whiteout("d2/g")
	ops := f.flush()
	f.wantHost("d1", "-")
	f.wantHost("d2/f", "f")
	f.wantHost("d2/sub/s", "s")
	f.wantHost("d2/g2", "g")
	f.wantHost("d2/g", "-")
	f.wantHost("d2/new", "new")
	if n := count(ops, upstream.WBWrite); n != 1 {
		t.Errorf("%d writes, want 1 (new): %+v", n, ops)
	}
	if n := count(ops, upstream.WBMoveOver); n != 2 {
		t.Errorf("%d moves, want 2: %+v", n, ops)
	}
	if ops := f.flush(); len(ops) != 0 {
		t.Errorf("second flush sent %+v", ops)
	}
	// Renamed again in the upper directory: the redirect still names
	// the lower path; the host's d2 moves to d3.
	os.Rename(filepath.Join(f.upper, "d2"), filepath.Join(f.upper, "d3"))
	f.whiteout("d2")
	ops = f.flush()
	f.wantHost("d3/sub/s", "s")
	f.wantHost("d3/g2", "g")
	f.wantHost("d2", "-")
	if n := count(ops, upstream.WBWrite); n != 0 {
		t.Errorf("%d writes after the second rename, want 0: %+v", n, ops)
	}
}

// TestSwap: two lower directories swapped through a third name, a cycle
// of moves, go through a temporary name.
func TestSwap(t *testing.T) {
	f := newFixture(t)
	f.hostFile("a/x", "from a")
	f.hostFile("b/y", "from b")
	for _, d := range [][2]string{{"a", "b"}, {"b", "a"}} {
		os.Mkdir(filepath.Join(f.upper, d[0]), 0o755)
		f.mark(d[0], xattrRedirect, d[1])
	}
	f.flush()
	f.wantHost("a/y", "from b")
	f.wantHost("b/x", "from a")
	if names := readDir(t, f.h.export); len(names) != 2 {
		t.Errorf("host root holds %v, want a and b", names)
	}
}

// TestMovedAfterWriteBack: a file and a directory written back, then
// renamed in the upper directory (found by inode), are renamed on the
// host without their data.
func TestMovedAfterWriteBack(t *testing.T) {
	f := newFixture(t)
	f.upperFile("dir/in", "in")
	f.upperFile("file", "data")
	f.flush()
	os.Rename(filepath.Join(f.upper, "dir"), filepath.Join(f.upper, "dir2"))
	os.Rename(filepath.Join(f.upper, "file"), filepath.Join(f.upper, "dir2/file"))
	ops := f.flush()
	f.wantHost("dir", "-")
	f.wantHost("file", "-")
	f.wantHost("dir2/in", "in")
	f.wantHost("dir2/file", "data")
	if n := count(ops, upstream.WBWrite); n != 0 {
		t.Errorf("%d writes, want 0: %+v", n, ops)
	}
	// Deleted from the upper directory without a whiteout (it never was
	// in the lower): removed from the host.
	os.Remove(filepath.Join(f.upper, "dir2/file"))
	f.flush()
	f.wantHost("dir2/file", "-")
}

// TestMetacopyLinks: a lower file hard-linked in the overlay (index=on)
// has both upper names metacopy with a redirect to its lower path; the
// host gets a hard link, and no data.
func TestMetacopyLinks(t *testing.T) {
	f := newFixture(t)
	f.hostFile("top", "lower data")
	for _, n := range []string{"top", "top3"} {
		f.upperFile(n, "")
	}
	os.Remove(filepath.Join(f.upper, "top3"))
	os.Link(filepath.Join(f.upper, "top"), filepath.Join(f.upper, "top3"))
	f.mark("top", xattrRedirect, "/top")
	f.mark("top", xattrMetacopy, "")
	os.Chmod(filepath.Join(f.upper, "top"), 0o600)
	ops := f.flush()
	f.wantHost("top3", "lower data")
	var a, b unix.Stat_t
	unix.Lstat(filepath.Join(f.h.export, "top"), &a)
	unix.Lstat(filepath.Join(f.h.export, "top3"), &b)
	if a.Ino != b.Ino || a.Mode&07777 != 0o600 {
		t.Errorf("host top %o ino %d, top3 ino %d: want one file, mode 0600", a.Mode, a.Ino, b.Ino)
	}
	if n := count(ops, upstream.WBWrite); n != 0 {
		t.Errorf("%d writes, want 0: %+v", n, ops)
	}
}

// TestSparseAndXattrRemoval: a sparse file's holes are not sent; an
// xattr removed in the upper directory goes from the host.
func TestSparseAndXattrRemoval(t *testing.T) {
	f := newFixture(t)
	p := filepath.Join(f.upper, "sparse")
	fd, _ := os.Create(p)
	fd.WriteAt([]byte("end"), 10<<20)
	fd.Close()
	f.mark("sparse", "user.a", "1")
	ops := f.flush()
	if n := count(ops, upstream.WBWrite); n != 1 {
		t.Errorf("%d writes for a file with one data extent, want 1: %+v", n, ops)
	}
	if fi, _ := os.Stat(filepath.Join(f.h.export, "sparse")); fi == nil || fi.Size() != 10<<20+3 {
		t.Errorf("host size %v", fi)
	}
	unix.Lremovexattr(p, "user.a")
	f.flush()
	if _, err := getXattr(filepath.Join(f.h.export, "sparse"), "user.a"); err != unix.ENODATA {
		t.Errorf("user.a on the host after its removal: %v", err)
	}
}

func readDir(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// TestInodeReusedForAnotherKind: a symlink made where a file was
// written back, with the file's inode number (ext4 hands a freed inode
// out again at once; tar makes a placeholder file for each symlink and
// replaces it at the end), is a new object: the host gets the symlink.
func TestInodeReusedForAnotherKind(t *testing.T) {
	f := newFixture(t)
	f.hostFile("x", "")
	os.Symlink("target", filepath.Join(f.upper, "x"))
	st := f.upperStat("x")
	f.seed("x", record{Kind: kFile, Ino: st.Ino, Ctime: 1, Data: true})
	f.flush()
	if target, err := os.Readlink(filepath.Join(f.h.export, "x")); target != "target" {
		t.Errorf("host x: %q, %v; want a symlink to target", target, err)
	}
}

// TestRenamedAfterCopyUp: a lower directory written back in place (a
// file in it changed), then renamed, then a lower file moved out of it
// (its absolute redirect names the directory's lower path): each pass
// finds the host's objects where the earlier ones left them.
func TestRenamedAfterCopyUp(t *testing.T) {
	f := newFixture(t)
	f.hostFile("d1/f", "f")
	f.hostFile("d1/x", "x")
	f.upperFile("d1/f", "")
	f.mark("d1/f", xattrMetacopy, "")
	os.Chmod(filepath.Join(f.upper, "d1/f"), 0o600)
	f.flush()
	os.Rename(filepath.Join(f.upper, "d1"), filepath.Join(f.upper, "d2"))
	f.mark("d2", xattrRedirect, "d1")
	f.whiteout("d1")
	f.flush()
	f.wantHost("d2/x", "x")
	f.upperFile("e/x", "")
	f.mark("e/x", xattrRedirect, "/d1/x")
	f.mark("e/x", xattrMetacopy, "")
	f.whiteout("d2/x")
	f.flush()
	f.wantHost("e/x", "x")
	f.wantHost("d2/x", "-")
	f.wantHost("d2/f", "f")
}

// TestWriteInProgress: a pass that saw a file in the middle of a write
// (ctime and mtime already set, the size still growing) recorded the
// final times with the old size; the next pass sees the size differ
// and sends the data again.
func TestWriteInProgress(t *testing.T) {
	f := newFixture(t)
	f.hostFile("big", "part")
	f.upperFile("big", "part and the rest")
	st := f.upperStat("big")
	f.seed("big", record{Kind: kFile, Ino: st.Ino, Ctime: unix.TimespecToNsec(st.Ctim), Mtime: unix.TimespecToNsec(st.Mtim),
		Size: 4, Data: true})
	f.flush()
	f.wantHost("big", "part and the rest")
}

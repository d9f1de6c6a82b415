//go:build linux

package upstream_test

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// applyOps applies ops in one request and returns their errnos.
func applyOps(t *testing.T, c *upstream.Client, ops []upstream.WBOp) []syscall.Errno {
	t.Helper()
	var resp upstream.ApplyResp
	must(t, c, upstream.OpApply, &upstream.ApplyReq{Ops: ops}, &resp)
	out := make([]syscall.Errno, len(resp.Errnos))
	for i, e := range resp.Errnos {
		out[i] = syscall.Errno(e)
	}
	return out
}

// wantApplied applies ops twice, as after a lost reply, and fails the
// test unless every op succeeds both times.
func wantApplied(t *testing.T, c *upstream.Client, ops []upstream.WBOp) {
	t.Helper()
	for round := 0; round < 2; round++ {
		for i, e := range applyOps(t, c, ops) {
			if e != 0 {
				t.Fatalf("round %d op %d (kind %d %q): %v", round, i, ops[i].Kind, ops[i].Path, e)
			}
		}
	}
}

func TestApplyRemoveTree(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	mkTree(t, ts.export, "d/e/f/file", "d/g", "keep")
	os.Symlink("/", filepath.Join(ts.export, "d/e/link"))
	wantApplied(t, c, []upstream.WBOp{
		{Kind: upstream.WBRemoveTree, Path: "d"},
		{Kind: upstream.WBRemoveTree, Path: "keep"},
		{Kind: upstream.WBRemoveTree, Path: "never"},
	})
	if names := listNames(t, ts.export); len(names) != 0 {
		t.Errorf("export holds %v after removing everything", names)
	}
}

func TestApplyMoveOver(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	mkTree(t, ts.export, "src/a", "dst/old/x", "f1", "d2/y")
	wantApplied(t, c, []upstream.WBOp{
		{Kind: upstream.WBMoveOver, Path: "src", Path2: "dst"}, // over a non-empty directory
		{Kind: upstream.WBMoveOver, Path: "f1", Path2: "d2"},   // a file over a directory
	})
	if got := listNames(t, filepath.Join(ts.export, "dst")); !slices.Equal(got, []string{"a"}) {
		t.Errorf("dst holds %v, want [a]", got)
	}
	if fi, err := os.Lstat(filepath.Join(ts.export, "d2")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("d2: %v, %v; want the regular file moved there", fi, err)
	}
	if got := listNames(t, ts.export); !slices.Equal(got, []string{"d2", "dst"}) {
		t.Errorf("export holds %v, want [d2 dst]", got)
	}
}

// TestApplyMoveOverLink: WBMoveOver of a name onto another hard link
// of the same file leaves the source gone (rename(2) alone does nothing
// there), and a move onto itself keeps it.
func TestApplyMoveOverLink(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	mkTree(t, ts.export, "a", "same")
	os.Link(filepath.Join(ts.export, "a"), filepath.Join(ts.export, "b"))
	wantApplied(t, c, []upstream.WBOp{
		{Kind: upstream.WBMoveOver, Path: "a", Path2: "b"},
		{Kind: upstream.WBMoveOver, Path: "same", Path2: "same"},
	})
	if got := listNames(t, ts.export); !slices.Equal(got, []string{"b", "same"}) {
		t.Errorf("export holds %v, want [b same]", got)
	}
}

func TestApplyReplace(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	mkTree(t, ts.export, "dir/x", "file", "linked", "sym")
	os.Link(filepath.Join(ts.export, "linked"), filepath.Join(ts.export, "other"))
	os.Remove(filepath.Join(ts.export, "sym"))
	os.Symlink("old", filepath.Join(ts.export, "sym"))
	os.Symlink("same", filepath.Join(ts.export, "symlinked"))
	os.Link(filepath.Join(ts.export, "symlinked"), filepath.Join(ts.export, "symother"))
	r := upstream.WBReplace
	wantApplied(t, c, []upstream.WBOp{
		{Kind: upstream.WBCreate, Path: "dir", Mode: 0o600, Flags: r},
		{Kind: upstream.WBMkdir, Path: "file", Mode: 0o700, Flags: r},
		{Kind: upstream.WBCreate, Path: "linked", Mode: 0o644, Flags: r},
		{Kind: upstream.WBSymlink, Path: "sym", Target: "new", Flags: r},
		{Kind: upstream.WBMknod, Path: "fifo", Mode: unix.S_IFIFO | 0o640, Flags: r},
		{Kind: upstream.WBSymlink, Path: "symlinked", Target: "same", Flags: r},
	})
	var a, b unix.Stat_t
	unix.Lstat(filepath.Join(ts.export, "symlinked"), &a)
	unix.Lstat(filepath.Join(ts.export, "symother"), &b)
	if a.Ino == b.Ino || a.Nlink != 1 {
		t.Errorf("symlinked is still a link of symother (inode %d, %d links): a symlink with another name was kept", a.Ino, a.Nlink)
	}
	wantType(t, filepath.Join(ts.export, "dir"), unix.S_IFREG)
	wantType(t, filepath.Join(ts.export, "file"), unix.S_IFDIR)
	wantType(t, filepath.Join(ts.export, "fifo"), unix.S_IFIFO)
	var st unix.Stat_t
	if unix.Lstat(filepath.Join(ts.export, "linked"), &st); st.Nlink != 1 {
		t.Errorf("linked has %d links: the file with another name was written in place", st.Nlink)
	}
	if target, _ := os.Readlink(filepath.Join(ts.export, "sym")); target != "new" {
		t.Errorf("sym -> %q, want new", target)
	}
	if e := applyOps(t, c, []upstream.WBOp{{Kind: upstream.WBMknod, Path: "dir2", Mode: unix.S_IFDIR | 0o700}}); e[0] != syscall.EPERM {
		t.Errorf("WBMknod of a directory: %v, want EPERM", e[0])
	}
}

// TestApplyDevice: WBMknod of a device makes the placeholder Mknod
// makes (a regular file on the host; a device with its number to the
// guest), and applied again, or with WBReplace over it, keeps it.
func TestApplyDevice(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	rdev := uint64(unix.Mkdev(1, 3))
	op := upstream.WBOp{Kind: upstream.WBMknod, Path: "null", Mode: unix.S_IFCHR | 0o640, Size: rdev}
	wantApplied(t, c, []upstream.WBOp{op, op})
	op.Flags = upstream.WBReplace
	wantApplied(t, c, []upstream.WBOp{op})
	wantType(t, filepath.Join(ts.export, "null"), unix.S_IFREG)
	e := lookup(t, c, upstream.RootID, "null")
	if e.Attr.Mode != unix.S_IFCHR|0o640 || uint64(e.Attr.Rdev) != rdev {
		t.Errorf("guest sees mode %o rdev %#x, want %o %#x", e.Attr.Mode, e.Attr.Rdev, unix.S_IFCHR|0o640, rdev)
	}
	blk := upstream.WBOp{Kind: upstream.WBMknod, Path: "null", Mode: unix.S_IFBLK | 0o640, Size: rdev, Flags: upstream.WBReplace}
	wantApplied(t, c, []upstream.WBOp{blk})
	if e := lookup(t, c, upstream.RootID, "null"); e.Attr.Mode&unix.S_IFMT != unix.S_IFBLK {
		t.Errorf("replaced by a block device: guest sees mode %o", e.Attr.Mode)
	}
	if e := applyOps(t, c, []upstream.WBOp{{Kind: upstream.WBMknod, Path: "big", Mode: unix.S_IFCHR | 0o600, Size: 1 << 40}}); e[0] != syscall.EINVAL {
		t.Errorf("WBMknod of a device number past 32 bits: %v, want EINVAL", e[0])
	}
}

func TestApplyXattrs(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	mkTree(t, ts.export, "f")
	p := filepath.Join(ts.export, "f")
	if err := unix.Setxattr(p, "user.old", []byte("1"), 0); err != nil {
		t.Skipf("no user xattrs on the export: %v", err)
	}
	unix.Setxattr(p, "user.cachefs.uid", []byte("7"), 0) // the host's own: kept
	data := upstream.EncodeXattrs([]upstream.Xattr{{Name: "user.a", Value: []byte("va")}, {Name: "user.empty"}})
	wantApplied(t, c, []upstream.WBOp{{Kind: upstream.WBXattrs, Path: "f", Data: data}})
	got := map[string]string{}
	buf := make([]byte, 4096)
	n, _ := unix.Listxattr(p, buf)
	for _, name := range splitOnNul(buf[:n]) {
		v := make([]byte, 256)
		k, _ := unix.Getxattr(p, name, v)
		got[name] = string(v[:k])
	}
	want := map[string]string{"user.a": "va", "user.empty": "", "user.cachefs.uid": "7"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("xattr %s = %q, want %q (all: %q)", k, got[k], v, got)
		}
	}
	if _, ok := got["user.old"]; ok {
		t.Errorf("user.old was kept: %q", got)
	}
	bad := upstream.EncodeXattrs([]upstream.Xattr{{Name: "trusted.x", Value: []byte("1")}})
	if e := applyOps(t, c, []upstream.WBOp{{Kind: upstream.WBXattrs, Path: "f", Data: bad}}); e[0] != syscall.EPERM {
		t.Errorf("WBXattrs with trusted.x: %v, want EPERM", e[0])
	}
}

func TestXattrsCodec(t *testing.T) {
	xs := []upstream.Xattr{{Name: "user.a", Value: []byte{0, 1, 2}}, {Name: "user.b", Value: []byte{}}}
	got, err := upstream.DecodeXattrs(upstream.EncodeXattrs(xs))
	if err != nil || len(got) != 2 || got[0].Name != "user.a" || string(got[0].Value) != "\x00\x01\x02" || got[1].Name != "user.b" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if _, err := upstream.DecodeXattrs([]byte{5, 'a'}); err == nil {
		t.Errorf("a truncated list decoded")
	}
}

// mkTree makes files (with their directories) under root.
func mkTree(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func listNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

func wantType(t *testing.T, p string, fmt uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil || st.Mode&unix.S_IFMT != fmt {
		t.Errorf("%s: mode %o, %v; want type %o", p, st.Mode, err, fmt)
	}
}

func splitOnNul(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			if i > start {
				out = append(out, string(b[start:i]))
			}
			start = i + 1
		}
	}
	return out
}

// TestAllowDevices: with ServerOptions.AllowDevices a guest's Mknod and
// WBMknod of a device make a real device node on the host, applied
// again without error.
func TestAllowDevices(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("device nodes need root")
	}
	ts := startServer(t, upstream.ServerOptions{AllowDevices: true})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	rdev := uint64(unix.Mkdev(1, 3))
	op := upstream.WBOp{Kind: upstream.WBMknod, Path: "null", Mode: unix.S_IFCHR | 0o640, Size: rdev}
	wantApplied(t, c, []upstream.WBOp{op, op})
	op.Flags = upstream.WBReplace
	wantApplied(t, c, []upstream.WBOp{op})
	var resp upstream.EntryResp
	must(t, c, upstream.OpMknod, &upstream.MknodReq{Parent: upstream.RootID, Name: "loop", Mode: unix.S_IFBLK | 0o600,
		Rdev: uint32(unix.Mkdev(7, 200)), Caller: rootCaller}, &resp)
	for name, want := range map[string]uint64{"null": rdev, "loop": uint64(unix.Mkdev(7, 200))} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(ts.export, name), &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFREG || uint64(st.Rdev) != want {
			t.Errorf("host %s: mode %o rdev %#x (%v), want a device node %#x", name, st.Mode, st.Rdev, err, want)
		}
	}
}

//go:build linux

package upstream_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

func boolPtr(b bool) *bool { return &b }

// TestOps runs each op once against a plain directory.
func TestOps(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{OwnerXattrs: boolPtr(false)})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	d := mkdir(t, c, upstream.RootID, "d")
	f, h := create(t, c, d.Node, "f")
	write(t, c, h, 0, []byte("hello"))
	must(t, c, upstream.OpFsync, &upstream.FsyncReq{Handle: h}, &upstream.Empty{})
	var seek upstream.LseekResp
	must(t, c, upstream.OpLseek, &upstream.LseekReq{Handle: h, Whence: unix.SEEK_END}, &seek)
	if seek.Offset != 5 {
		t.Errorf("Lseek SEEK_END: got %d, want 5", seek.Offset)
	}
	must(t, c, upstream.OpRelease, &upstream.HandleReq{Handle: h}, &upstream.Empty{})
	var attr upstream.AttrResp
	must(t, c, upstream.OpSetattr, &upstream.SetattrReq{Node: f.Node, Valid: upstream.SetSize | upstream.SetMode,
		Size: 3, Mode: 0600}, &attr)
	if attr.Attr.Size != 3 || attr.Attr.Mode != syscall.S_IFREG|0600 {
		t.Errorf("Setattr: got size %d mode %o", attr.Attr.Size, attr.Attr.Mode)
	}
	var sl upstream.EntryResp
	must(t, c, upstream.OpSymlink, &upstream.SymlinkReq{Parent: d.Node, Name: "l", Target: "f"}, &sl)
	var rl upstream.ReadlinkResp
	must(t, c, upstream.OpReadlink, &upstream.NodeReq{Node: sl.Entry.Node}, &rl)
	if rl.Target != "f" {
		t.Errorf("Readlink: got %q", rl.Target)
	}
	must(t, c, upstream.OpLink, &upstream.LinkReq{Node: f.Node, NewParent: upstream.RootID, NewName: "g"}, &upstream.EntryResp{})
	must(t, c, upstream.OpRename, &upstream.RenameReq{Parent: upstream.RootID, Name: "g", NewParent: d.Node, NewName: "h"}, &upstream.ChangedResp{})
	must(t, c, upstream.OpSetxattr, &upstream.SetxattrReq{Node: f.Node, Name: "user.k", Data: []byte("v")}, &upstream.Empty{})
	var xa upstream.XattrResp
	must(t, c, upstream.OpGetxattr, &upstream.XattrReq{Node: f.Node, Name: "user.k", Size: 100}, &xa)
	if string(xa.Data) != "v" {
		t.Errorf("Getxattr: got %q", xa.Data)
	}
	if got := readdir(t, c, d.Node); got != ". .. f h l" {
		t.Errorf("Readdir: got %q", got)
	}
	must(t, c, upstream.OpUnlink, &upstream.UnlinkReq{Parent: d.Node, Name: "h"}, &upstream.ChangedResp{})
	var sf upstream.StatfsResp
	must(t, c, upstream.OpStatfs, &upstream.Empty{}, &sf)
	if sf.Bsize == 0 || sf.NameLen == 0 {
		t.Errorf("Statfs: %+v", sf)
	}
	// Two references: from Symlink and from the plus listing.
	forget := []upstream.ForgetItem{{Node: sl.Entry.Node, Count: 1}, {Node: sl.Entry.Node, Count: 1}}
	must(t, c, upstream.OpForget, &upstream.ForgetReq{Items: forget[:1]}, &upstream.Empty{})
	must(t, c, upstream.OpGetattr, &upstream.NodeReq{Node: sl.Entry.Node}, &upstream.AttrResp{})
	must(t, c, upstream.OpForget, &upstream.ForgetReq{Items: forget[1:]}, &upstream.Empty{})
	err := try(c, upstream.OpGetattr, &upstream.NodeReq{Node: sl.Entry.Node}, &upstream.AttrResp{})
	wantErrno(t, "Getattr after Forget", err, syscall.ESTALE)
}

// readdir lists a directory with plus entries, sorted, space-separated.
func readdir(t *testing.T, c *upstream.Client, dir uint64) string {
	t.Helper()
	var oh upstream.OpenResp
	must(t, c, upstream.OpOpendir, &upstream.NodeReq{Node: dir}, &oh)
	defer must(t, c, upstream.OpReleasedir, &upstream.HandleReq{Handle: oh.Handle}, &upstream.Empty{})
	var names []string
	for off := uint64(0); ; {
		var rd upstream.ReaddirResp
		must(t, c, upstream.OpReaddir, &upstream.ReaddirReq{Handle: oh.Handle, Offset: off, Max: 2, Plus: true}, &rd)
		for _, e := range rd.Entries {
			names = append(names, e.Name)
			off = e.Off
			if e.Name != "." && e.Name != ".." && e.Entry.Node == 0 {
				t.Errorf("Readdir plus: %s has no node", e.Name)
			}
		}
		if rd.EOF {
			break
		}
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

func TestReadOnlyExport(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("data"), 0644)
	os.Mkdir(filepath.Join(export, "d"), 0755)
	ts := startServer(t, upstream.ServerOptions{Export: export, ReadOnly: true})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	if !c.Hello().ReadOnly {
		t.Errorf("Hello: ReadOnly is false")
	}
	f := lookup(t, c, upstream.RootID, "f")
	h := open(t, c, f.Node, syscall.O_RDONLY)
	if got := read(t, c, h, 0, 10); string(got) != "data" {
		t.Errorf("Read: got %q", got)
	}
	root := uint64(upstream.RootID)
	writes := []struct {
		op  upstream.Op
		req any
	}{
		{upstream.OpCreate, &upstream.CreateReq{Parent: root, Name: "n", Flags: syscall.O_RDWR, Mode: 0644}},
		{upstream.OpMkdir, &upstream.MknodReq{Parent: root, Name: "n", Mode: 0755}},
		{upstream.OpMknod, &upstream.MknodReq{Parent: root, Name: "n", Mode: syscall.S_IFIFO | 0644}},
		{upstream.OpSymlink, &upstream.SymlinkReq{Parent: root, Name: "n", Target: "f"}},
		{upstream.OpLink, &upstream.LinkReq{Node: f.Node, NewParent: root, NewName: "n"}},
		{upstream.OpUnlink, &upstream.UnlinkReq{Parent: root, Name: "f"}},
		{upstream.OpRmdir, &upstream.UnlinkReq{Parent: root, Name: "d"}},
		{upstream.OpRename, &upstream.RenameReq{Parent: root, Name: "f", NewParent: root, NewName: "n"}},
		{upstream.OpSetattr, &upstream.SetattrReq{Node: f.Node, Valid: upstream.SetSize}},
		{upstream.OpSetxattr, &upstream.SetxattrReq{Node: f.Node, Name: "user.k"}},
		{upstream.OpRemovexattr, &upstream.XattrReq{Node: f.Node, Name: "user.k"}},
		{upstream.OpOpen, &upstream.OpenReq{Node: f.Node, Flags: syscall.O_WRONLY}},
		{upstream.OpOpen, &upstream.OpenReq{Node: f.Node, Flags: syscall.O_RDONLY | syscall.O_TRUNC}},
		{upstream.OpWrite, &upstream.WriteReq{Handle: h, Data: []byte("x")}},
		{upstream.OpFallocate, &upstream.FallocateReq{Handle: h, Length: 100}},
	}
	for _, w := range writes {
		wantErrno(t, w.op.String(), try(c, w.op, w.req, &upstream.Empty{}), syscall.EROFS)
	}
	if got, _ := os.ReadFile(filepath.Join(export, "f")); string(got) != "data" {
		t.Errorf("host file: got %q", got)
	}
	if ents, _ := os.ReadDir(export); len(ents) != 2 {
		t.Errorf("export holds %d entries, want 2", len(ents))
	}
}

func TestMknodTypes(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	tests := []struct {
		name string
		mode uint32
		want syscall.Errno
	}{
		{"reg", syscall.S_IFREG | 0644, 0},
		{"plain", 0644, 0},
		{"fifo", syscall.S_IFIFO | 0644, 0},
		{"sock", syscall.S_IFSOCK | 0644, 0},
		{"chr", syscall.S_IFCHR | 0666, 0},
		{"blk", syscall.S_IFBLK | 0666, 0},
		{"dir", syscall.S_IFDIR | 0755, syscall.EPERM},
		{"lnk", syscall.S_IFLNK | 0777, syscall.EPERM},
	}
	for _, tt := range tests {
		err := try(c, upstream.OpMknod, &upstream.MknodReq{Parent: upstream.RootID, Name: tt.name,
			Mode: tt.mode, Rdev: uint32(unix.Mkdev(1, 3))}, &upstream.EntryResp{}) // 1,3: /dev/null
		if tt.want == 0 && err != nil || tt.want != 0 && err != tt.want {
			t.Errorf("Mknod %s: got %v, want %v", tt.name, err, tt.want)
		}
		fi, serr := os.Lstat(filepath.Join(ts.export, tt.name))
		if exists := serr == nil; exists != (tt.want == 0) {
			t.Errorf("Mknod %s: host file exists: %v", tt.name, exists)
		}
		if dev := tt.mode & syscall.S_IFMT; serr == nil && (dev == syscall.S_IFCHR || dev == syscall.S_IFBLK) {
			if !fi.Mode().IsRegular() || fi.Size() != 0 {
				t.Errorf("Mknod %s: host file is %v of %d bytes, want an empty regular file", tt.name, fi.Mode(), fi.Size())
			}
			var resp upstream.EntryResp
			if err := try(c, upstream.OpLookup, &upstream.LookupReq{Parent: upstream.RootID, Name: tt.name}, &resp); err != nil {
				t.Fatalf("Lookup %s: %v", tt.name, err)
			}
			if a := resp.Entry.Attr; a.Mode != tt.mode || a.Rdev != uint32(unix.Mkdev(1, 3)) {
				t.Errorf("Lookup %s: mode %o rdev %d, want %o and %d", tt.name, a.Mode, a.Rdev, tt.mode, unix.Mkdev(1, 3))
			}
		}
	}
}

// TestOwnerXattrs keeps guest ownership in an xattr, as a server that
// runs as an ordinary user must.
func TestOwnerXattrs(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{OwnerXattrs: boolPtr(true)})
	if err := unix.Setxattr(ts.export, "user.probe", []byte("1"), 0); err != nil {
		t.Skipf("no user xattrs on %s: %v", ts.export, err)
	}
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	var cr upstream.CreateResp
	must(t, c, upstream.OpCreate, &upstream.CreateReq{Parent: upstream.RootID, Name: "f", Flags: syscall.O_RDWR,
		Mode: 0644, Caller: upstream.Caller{Uid: 1000, Gid: 100}}, &cr)
	if a := cr.Entry.Attr; a.Uid != 1000 || a.Gid != 100 {
		t.Errorf("Create: owner %d:%d, want 1000:100", a.Uid, a.Gid)
	}
	host := filepath.Join(ts.export, "f")
	before := hostOwner(t, host)
	var attr upstream.AttrResp
	must(t, c, upstream.OpSetattr, &upstream.SetattrReq{Node: cr.Entry.Node, Valid: upstream.SetUid | upstream.SetGid,
		Uid: 4242, Gid: 4343}, &attr)
	must(t, c, upstream.OpSetattr, &upstream.SetattrReq{Node: cr.Entry.Node, Valid: upstream.SetGid, Gid: 4444}, &attr)
	must(t, c, upstream.OpGetattr, &upstream.NodeReq{Node: cr.Entry.Node}, &attr)
	if attr.Attr.Uid != 4242 || attr.Attr.Gid != 4444 {
		t.Errorf("Getattr: owner %d:%d, want 4242:4444", attr.Attr.Uid, attr.Attr.Gid)
	}
	if got := hostOwner(t, host); got != before {
		t.Errorf("host owner changed from %s to %s", before, got)
	}
	buf := make([]byte, 64)
	n, err := unix.Getxattr(host, "user.cachefs.owner", buf)
	if err != nil || string(buf[:n]) != "4242:4444" {
		t.Errorf("host xattr user.cachefs.owner: got %q %v", buf[:max(n, 0)], err)
	}
	if e := lookup(t, c, upstream.RootID, "f"); e.Attr.Uid != 4242 || e.Attr.Gid != 4444 {
		t.Errorf("Lookup: owner %d:%d", e.Attr.Uid, e.Attr.Gid)
	}
	// The owner xattr is the server's: hidden from the guest and not
	// writable by it.
	var xa upstream.XattrResp
	must(t, c, upstream.OpListxattr, &upstream.XattrReq{Node: cr.Entry.Node, Size: 1024}, &xa)
	if bytes.Contains(xa.Data, []byte("cachefs")) {
		t.Errorf("Listxattr shows %q", xa.Data)
	}
	err = try(c, upstream.OpGetxattr, &upstream.XattrReq{Node: cr.Entry.Node, Name: "user.cachefs.owner", Size: 64}, &xa)
	wantErrno(t, "Getxattr owner", err, syscall.ENODATA)
	err = try(c, upstream.OpSetxattr, &upstream.SetxattrReq{Node: cr.Entry.Node, Name: "user.cachefs.owner", Data: []byte("0:0")}, &upstream.Empty{})
	wantErrno(t, "Setxattr owner", err, syscall.EPERM)
}

func hostOwner(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatalf("Lstat: %v", err)
	}
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

// TestChown changes the host owner when the server may.
func TestChown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	ts := startServer(t, upstream.ServerOptions{OwnerXattrs: boolPtr(false)})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	e, _ := create(t, c, upstream.RootID, "f")
	must(t, c, upstream.OpSetattr, &upstream.SetattrReq{Node: e.Node, Valid: upstream.SetUid | upstream.SetGid,
		Uid: 4242, Gid: 4343}, &upstream.AttrResp{})
	if got := hostOwner(t, filepath.Join(ts.export, "f")); got != "4242:4343" {
		t.Errorf("host owner: got %s, want 4242:4343", got)
	}
}

// TestBlockedLockEndsWithSession leaves a lock request blocked on a lock
// of the same session and disconnects: when the session's grace period
// ends, its locks go and the blocked request completes.
func TestBlockedLockEndsWithSession(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{SessionGrace: 50 * time.Millisecond})
	c := newClient(t, ts.addr, upstream.ClientOptions{Reconnect: time.Millisecond})
	_, waiter := lockedFile(t, c, 1)
	slow := make(chan error, 1)
	base := ts.srv.Stats().Requests
	go func() { slow <- try(c, upstream.OpSetlk, lockWait(waiter), &upstream.Empty{}) }()
	waitRequests(t, ts.srv, base+1)
	c.Close()
	<-slow
	fd, err := unix.Open(filepath.Join(ts.export, "locked"), unix.O_RDWR, 0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer unix.Close(fd)
	fl := unix.Flock_t{Type: unix.F_WRLCK}
	for deadline := time.Now().Add(callTimeout); ; time.Sleep(10 * time.Millisecond) {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &fl)
		if err == nil && ts.srv.Stats().Sessions == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host lock: %v, sessions %d: the session's locks outlive it", err, ts.srv.Stats().Sessions)
		}
	}
}

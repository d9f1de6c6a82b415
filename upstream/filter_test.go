//go:build linux

package upstream_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// Server-side filters: what a guest may not do to the host even where
// the server's privileges would let it.

const renameWhiteout = 4 // RENAME_WHITEOUT

// TestRenameFlagsRefused sends RENAME_WHITEOUT and unknown flags, by
// Rename and by write-back: each fails with EINVAL and changes nothing.
func TestRenameFlagsRefused(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	create(t, c, upstream.RootID, "a")
	for _, flags := range []uint32{renameWhiteout, renameWhiteout | upstream.RenameNoReplace, 1 << 3, 1 << 31} {
		err := try(c, upstream.OpRename, &upstream.RenameReq{Parent: upstream.RootID, Name: "a",
			NewParent: upstream.RootID, NewName: "b", Flags: flags}, &upstream.ChangedResp{})
		wantErrno(t, fmt.Sprintf("Rename with flags %#x", flags), err, syscall.EINVAL)
		var ar upstream.ApplyResp
		must(t, c, upstream.OpApply, &upstream.ApplyReq{Ops: []upstream.WBOp{
			{Kind: upstream.WBRename, Path: "a", Path2: "b", Flags: flags}}}, &ar)
		if ar.Errnos[0] != uint32(syscall.EINVAL) {
			t.Errorf("WBRename with flags %#x: got errno %d, want EINVAL", flags, ar.Errnos[0])
		}
	}
	if got := hostNames(t, ts.export); got != "a" {
		t.Errorf("export holds %q, want only a", got)
	}
	must(t, c, upstream.OpRename, &upstream.RenameReq{Parent: upstream.RootID, Name: "a",
		NewParent: upstream.RootID, NewName: "b", Flags: upstream.RenameNoReplace}, &upstream.ChangedResp{})
	if got := hostNames(t, ts.export); got != "b" {
		t.Errorf("after RENAME_NOREPLACE the export holds %q, want only b", got)
	}
}

// hostNames lists a host directory, space-separated.
func hostNames(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// TestXattrNamespacesRefused checks that the guest can neither see nor
// change trusted.* and security.* attributes the host has, nor set its
// own, while user.* attributes pass.
func TestXattrNamespacesRefused(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	e, _ := create(t, c, upstream.RootID, "f")
	host := filepath.Join(ts.export, "f")
	hostSet := map[string]bool{}
	for _, name := range []string{"trusted.host", "security.host", "user.host"} {
		if err := unix.Setxattr(host, name, []byte("v"), 0); err != nil {
			t.Logf("host Setxattr %s: %v (not tested)", name, err)
			continue
		}
		hostSet[name] = true
	}
	if !hostSet["user.host"] {
		t.Skipf("no user xattrs on %s", ts.export)
	}
	var xa upstream.XattrResp
	must(t, c, upstream.OpListxattr, &upstream.XattrReq{Node: e.Node, Size: 1024}, &xa)
	if got := string(bytes.ReplaceAll(xa.Data, []byte{0}, []byte{' '})); got != "user.host " {
		t.Errorf("Listxattr: got %q, want only user.host", got)
	}
	must(t, c, upstream.OpListxattr, &upstream.XattrReq{Node: e.Node}, &xa)
	if xa.Size != uint32(len("user.host\x00")) {
		t.Errorf("Listxattr size: got %d, want %d", xa.Size, len("user.host\x00"))
	}
	for _, name := range []string{"trusted.host", "security.host", "security.capability", "trusted.overlay.opaque"} {
		err := try(c, upstream.OpGetxattr, &upstream.XattrReq{Node: e.Node, Name: name, Size: 64}, &xa)
		wantErrno(t, "Getxattr "+name, err, syscall.ENODATA)
		err = try(c, upstream.OpSetxattr, &upstream.SetxattrReq{Node: e.Node, Name: name, Data: []byte("x")}, &upstream.Empty{})
		wantErrno(t, "Setxattr "+name, err, syscall.EPERM)
		err = try(c, upstream.OpRemovexattr, &upstream.XattrReq{Node: e.Node, Name: name}, &upstream.Empty{})
		wantErrno(t, "Removexattr "+name, err, syscall.EPERM)
	}
	for name := range hostSet {
		buf := make([]byte, 16)
		if n, err := unix.Getxattr(host, name, buf); err != nil || string(buf[:n]) != "v" {
			t.Errorf("host %s after the guest's attempts: got %q %v, want \"v\"", name, buf[:max(n, 0)], err)
		}
	}
	if _, err := unix.Getxattr(host, "security.capability", nil); err != unix.ENODATA {
		t.Errorf("host security.capability: got %v, want ENODATA", err)
	}
	must(t, c, upstream.OpGetxattr, &upstream.XattrReq{Node: e.Node, Name: "user.host", Size: 64}, &xa)
	if string(xa.Data) != "v" {
		t.Errorf("Getxattr user.host: got %q", xa.Data)
	}
}

// hostMode returns a host file's permission bits.
func hostMode(t *testing.T, path string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatalf("Lstat: %v", err)
	}
	return st.Mode & 07777
}

// wantModes checks the mode the guest sees for a file and the one its
// host file has.
func wantModes(t *testing.T, what string, got upstream.Attr, guest uint32, host string, hostWant uint32) {
	t.Helper()
	if got.Mode&07777 != guest {
		t.Errorf("%s: guest sees mode %o, want %o", what, got.Mode&07777, guest)
	}
	if m := hostMode(t, host); m != hostWant {
		t.Errorf("%s: host mode %o, want %o", what, m, hostWant)
	}
}

func setattr(t *testing.T, c *upstream.Client, req *upstream.SetattrReq) upstream.Attr {
	t.Helper()
	var resp upstream.AttrResp
	must(t, c, upstream.OpSetattr, req, &resp)
	return resp.Attr
}

func getattr(t *testing.T, c *upstream.Client, node uint64) upstream.Attr {
	t.Helper()
	var resp upstream.AttrResp
	must(t, c, upstream.OpGetattr, &upstream.NodeReq{Node: node}, &resp)
	return resp.Attr
}

// TestSetidKept checks the default set-id policy: the bits a guest gives
// a regular file stay off the host file, in the server's xattr, and the
// guest sees them in every reply that carries attributes. Owners go to
// the host file by chown, or to the owner xattr.
func TestSetidKept(t *testing.T) {
	for _, ownerXattrs := range []bool{false, true} {
		t.Run(fmt.Sprintf("OwnerXattrs=%v", ownerXattrs), func(t *testing.T) {
			testSetidKept(t, upstream.ServerOptions{OwnerXattrs: boolPtr(ownerXattrs)})
		})
	}
}

func testSetidKept(t *testing.T, opts upstream.ServerOptions) {
	ts := startServer(t, opts)
	if err := unix.Setxattr(ts.export, "user.probe", []byte("1"), 0); err != nil {
		t.Skipf("no user xattrs on %s: %v", ts.export, err)
	}
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	host := filepath.Join(ts.export, "f")
	var cr upstream.CreateResp
	must(t, c, upstream.OpCreate, &upstream.CreateReq{Parent: upstream.RootID, Name: "f", Flags: syscall.O_RDWR,
		Mode: 04755, Caller: rootCaller}, &cr)
	f := cr.Entry.Node
	wantModes(t, "Create 04755", cr.Entry.Attr, 04755, host, 0755)
	wantModes(t, "Getattr", getattr(t, c, f), 04755, host, 0755)
	wantModes(t, "Lookup", lookup(t, c, upstream.RootID, "f").Attr, 04755, host, 0755)
	wantModes(t, "Setattr 02750", setattr(t, c, &upstream.SetattrReq{Node: f, Valid: upstream.SetMode, Mode: 02750}), 02750, host, 0750)
	wantModes(t, "Setattr 06755", setattr(t, c, &upstream.SetattrReq{Node: f, Valid: upstream.SetMode, Mode: 06755}), 06755, host, 0755)

	// The xattr is the server's: the guest can neither see nor change it.
	var xa upstream.XattrResp
	must(t, c, upstream.OpListxattr, &upstream.XattrReq{Node: f, Size: 1024}, &xa)
	if bytes.Contains(xa.Data, []byte("cachefs")) {
		t.Errorf("Listxattr shows %q", xa.Data)
	}
	err := try(c, upstream.OpSetxattr, &upstream.SetxattrReq{Node: f, Name: "user.cachefs.setid", Data: []byte("0")}, &upstream.Empty{})
	wantErrno(t, "Setxattr user.cachefs.setid", err, syscall.EPERM)

	// A change of owner drops set-user-id, and set-group-id with group
	// execution, as Linux does; a write by an unprivileged process
	// drops both.
	wantModes(t, "chown of 06755", setattr(t, c, &upstream.SetattrReq{Node: f, Valid: upstream.SetUid, Uid: 1000}), 0755, host, 0755)
	setattr(t, c, &upstream.SetattrReq{Node: f, Valid: upstream.SetMode, Mode: 06745})
	wantModes(t, "chown of 06745", setattr(t, c, &upstream.SetattrReq{Node: f, Valid: upstream.SetGid, Gid: 1000}), 02745, host, 0745)
	write(t, c, cr.Handle, 0, []byte("x"))
	wantModes(t, "plain write", getattr(t, c, f), 02745, host, 0745)
	must(t, c, upstream.OpWrite, &upstream.WriteReq{Handle: cr.Handle, Data: []byte("y"), Flags: upstream.WriteKillSuidgid}, &upstream.WriteResp{})
	wantModes(t, "write killing set-id", getattr(t, c, f), 0745, host, 0745)
	setattr(t, c, &upstream.SetattrReq{Node: f, Valid: upstream.SetMode, Mode: 04700})
	wantModes(t, "truncate killing set-id", setattr(t, c, &upstream.SetattrReq{Node: f,
		Valid: upstream.SetSize | upstream.SetKillSuidgid}), 0700, host, 0700)
	if _, err := unix.Getxattr(host, "user.cachefs.setid", nil); err != unix.ENODATA {
		t.Errorf("host user.cachefs.setid with no set-id bits left: got %v, want ENODATA", err)
	}

	var mr upstream.EntryResp
	must(t, c, upstream.OpMknod, &upstream.MknodReq{Parent: upstream.RootID, Name: "m", Mode: 02711, Caller: rootCaller}, &mr)
	wantModes(t, "Mknod 02711", mr.Entry.Attr, 02711, filepath.Join(ts.export, "m"), 0711)
	d := mkdir(t, c, upstream.RootID, "d")
	wantModes(t, "directory 02755", setattr(t, c, &upstream.SetattrReq{Node: d.Node, Valid: upstream.SetMode, Mode: 02755}),
		02755, filepath.Join(ts.export, "d"), 02755)
}

// TestSetidKeptWriteBack applies set-id modes by write-back: they are
// kept as for the ops, and visible to a lookup.
func TestSetidKeptWriteBack(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	if err := unix.Setxattr(ts.export, "user.probe", []byte("1"), 0); err != nil {
		t.Skipf("no user xattrs on %s: %v", ts.export, err)
	}
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	host := filepath.Join(ts.export, "w")
	apply := func(op upstream.WBOp) { t.Helper(); applyOne(t, c, op) }
	apply(upstream.WBOp{Kind: upstream.WBCreate, Path: "w", Mode: 04711})
	wantModes(t, "WBCreate 04711", lookup(t, c, upstream.RootID, "w").Attr, 04711, host, 0711)
	apply(upstream.WBOp{Kind: upstream.WBSetattr, Path: "w", Valid: upstream.SetMode, Mode: 06755})
	wantModes(t, "WBSetattr 06755", lookup(t, c, upstream.RootID, "w").Attr, 06755, host, 0755)
	apply(upstream.WBOp{Kind: upstream.WBSetattr, Path: "w", Valid: upstream.SetUid, Uid: 1000})
	wantModes(t, "WBSetattr chown", lookup(t, c, upstream.RootID, "w").Attr, 0755, host, 0755)
	// mode and owner in one op: the chown drops the set-id bits just
	// set, and leaves a mode without them as it is
	apply(upstream.WBOp{Kind: upstream.WBSetattr, Path: "w", Valid: upstream.SetMode | upstream.SetUid, Mode: 06755, Uid: 1001})
	wantModes(t, "WBSetattr 06755 and chown", lookup(t, c, upstream.RootID, "w").Attr, 0755, host, 0755)
	apply(upstream.WBOp{Kind: upstream.WBSetattr, Path: "w", Valid: upstream.SetMode | upstream.SetUid, Mode: 01640, Uid: 1002})
	wantModes(t, "WBSetattr 01640 and chown", lookup(t, c, upstream.RootID, "w").Attr, 01640, host, 01640)
	apply(upstream.WBOp{Kind: upstream.WBMkdir, Path: "d", Mode: 0755})
	apply(upstream.WBOp{Kind: upstream.WBSetattr, Path: "d", Valid: upstream.SetMode, Mode: 02755})
	wantModes(t, "directory 02755", lookup(t, c, upstream.RootID, "d").Attr, 02755, filepath.Join(ts.export, "d"), 02755)
}

// applyOne applies op by write-back and fails the test unless it
// succeeds.
func applyOne(t *testing.T, c *upstream.Client, op upstream.WBOp) {
	t.Helper()
	var ar upstream.ApplyResp
	must(t, c, upstream.OpApply, &upstream.ApplyReq{Ops: []upstream.WBOp{op}}, &ar)
	if ar.Errnos[0] != 0 {
		t.Fatalf("Apply %+v: errno %d", op, ar.Errnos[0])
	}
}

// TestSetidWriteBackCalls: a chmod by write-back touches the set-id
// xattr only where it holds bits or must: a file without set-id bits is
// chmodded without a removexattr of it.
func TestSetidWriteBackCalls(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	if err := unix.Setxattr(ts.export, "user.probe", []byte("1"), 0); err != nil {
		t.Skipf("no user xattrs on %s: %v", ts.export, err)
	}
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	host := filepath.Join(ts.export, "w")
	applyOne(t, c, upstream.WBOp{Kind: upstream.WBCreate, Path: "w", Mode: 0644})
	start := upstream.SetidCalls(ts.srv)
	for _, step := range []struct {
		mode, host uint32
		calls      uint64 // setxattr and removexattr calls since the create
	}{
		{0600, 0600, 0}, {0755, 0755, 0},
		{04755, 0755, 1}, // kept in the xattr
		{0755, 0755, 2},  // which goes
		{0700, 0700, 2},
	} {
		applyOne(t, c, upstream.WBOp{Kind: upstream.WBSetattr, Path: "w", Valid: upstream.SetMode, Mode: step.mode})
		what := fmt.Sprintf("WBSetattr %04o", step.mode)
		wantModes(t, what, lookup(t, c, upstream.RootID, "w").Attr, step.mode, host, step.host)
		if got := upstream.SetidCalls(ts.srv) - start; got != step.calls {
			t.Errorf("%s: %d set-id xattr calls since the create, want %d", what, got, step.calls)
		}
	}
	if _, err := unix.Getxattr(host, "user.cachefs.setid", nil); err != unix.ENODATA {
		t.Errorf("host user.cachefs.setid: got %v, want ENODATA", err)
	}
}

// TestAllowSetID applies set-id bits to the host file, as a server run
// with --allow-setid does.
func TestAllowSetID(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{AllowSetID: true})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	var cr upstream.CreateResp
	must(t, c, upstream.OpCreate, &upstream.CreateReq{Parent: upstream.RootID, Name: "f", Flags: syscall.O_RDWR,
		Mode: 0755, Caller: rootCaller}, &cr)
	host := filepath.Join(ts.export, "f")
	wantModes(t, "Setattr 04755", setattr(t, c, &upstream.SetattrReq{Node: cr.Entry.Node, Valid: upstream.SetMode, Mode: 04755}), 04755, host, 04755)
	if _, err := unix.Getxattr(host, "user.cachefs.setid", nil); err != unix.ENODATA {
		t.Errorf("host user.cachefs.setid: got %v, want ENODATA", err)
	}
}

// TestParkNamesHidden: a name the write-back parks an object at
// (upstream.ParkPrefix) is left out of listings and whole-tree reads, a
// lookup does not find it and a guest's create may not make it; the
// write-back's ops still move it by path.
func TestParkNamesHidden(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	park := upstream.ParkPrefix + "42"
	if err := os.WriteFile(filepath.Join(ts.export, park), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	create(t, c, upstream.RootID, "a")
	if got := readdir(t, c, upstream.RootID); got != ". .. a" {
		t.Errorf("Readdir: got %q, want \". .. a\"", got)
	}
	var tr upstream.TreeResp
	must(t, c, upstream.OpReadTree, &upstream.TreeReq{Node: upstream.RootID, MaxEntries: 100}, &tr)
	for _, d := range tr.Dirs {
		for _, e := range d.Entries {
			if upstream.Parked(e.Name) {
				t.Errorf("ReadTree lists %s", e.Name)
			}
		}
	}
	err := try(c, upstream.OpLookup, &upstream.LookupReq{Parent: upstream.RootID, Name: park}, &upstream.EntryResp{})
	wantErrno(t, "Lookup "+park, err, syscall.ENOENT)
	err = try(c, upstream.OpCreate, &upstream.CreateReq{Parent: upstream.RootID, Name: upstream.ParkPrefix + "7",
		Flags: syscall.O_RDWR, Mode: 0o644, Caller: rootCaller}, &upstream.CreateResp{})
	wantErrno(t, "Create of a park name", err, syscall.EPERM)
	applyOne(t, c, upstream.WBOp{Kind: upstream.WBMoveOver, Path: park, Path2: "b"})
	if got := hostNames(t, ts.export); got != "a b" {
		t.Errorf("host after the move out of the park name: %q, want \"a b\"", got)
	}
}

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

package upstream_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// TestApplyStopsAtNoSpace applies a batch on an export without space:
// the write that does not fit fails with ENOSPC, and the ops after it
// are not applied (ECANCELED), so that the guest may send them again in
// order once there is space; the ops before it are applied.
func TestApplyStopsAtNoSpace(t *testing.T) {
	export := t.TempDir()
	if err := unix.Mount("tmpfs", export, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(export, unix.MNT_DETACH) })
	ts := startServer(t, upstream.ServerOptions{Export: export})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	big := bytes.Repeat([]byte{0x5a}, 2<<20) // not zeros: those the host leaves as holes
	ops := []upstream.WBOp{
		{Kind: upstream.WBMkdir, Path: "before", Mode: 0o755},
		{Kind: upstream.WBCreate, Path: "big", Mode: 0o644},
		{Kind: upstream.WBWrite, Path: "big", Data: big, First: true, Size: uint64(len(big))},
		{Kind: upstream.WBMkdir, Path: "after", Mode: 0o755},
		{Kind: upstream.WBRmdir, Path: "before"},
	}
	var resp upstream.ApplyResp
	must(t, c, upstream.OpApply, &upstream.ApplyReq{Ops: ops}, &resp)
	want := []syscall.Errno{0, 0, syscall.ENOSPC, syscall.ECANCELED, syscall.ECANCELED}
	for i, e := range resp.Errnos {
		if syscall.Errno(e) != want[i] {
			t.Errorf("op %d (kind %d %q): errno %v, want %v", i, ops[i].Kind, ops[i].Path, syscall.Errno(e), want[i])
		}
	}
	if _, err := os.Stat(filepath.Join(export, "before")); err != nil {
		t.Errorf("the op before the failed write was not applied: %v", err)
	}
	if _, err := os.Stat(filepath.Join(export, "after")); err == nil {
		t.Errorf("the op after the failed write was applied")
	}
}

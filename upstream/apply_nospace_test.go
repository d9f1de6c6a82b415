//go:build linux

package upstream_test

import (
	"bytes"
	"context"
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

// TestApplyStopsAtNoFiles applies a batch while the server's process
// may open no more files: the op that needs a descriptor fails with
// EMFILE and ends the request (ECANCELED after it), as for space, so
// that the guest keeps it and sends it again rather than drop it.
func TestApplyStopsAtNoFiles(t *testing.T) {
	export := t.TempDir()
	ts := startServer(t, upstream.ServerOptions{Export: export})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	os.WriteFile(filepath.Join(export, "f"), nil, 0644)
	var resp upstream.ApplyResp
	must(t, c, upstream.OpApply, &upstream.ApplyReq{Ops: []upstream.WBOp{{Kind: upstream.WBMkdir, Path: "warm", Mode: 0o755}}}, &resp)
	ops := []upstream.WBOp{
		{Kind: upstream.WBWrite, Path: "f", Data: []byte("data"), First: true, Size: 4},
		{Kind: upstream.WBMkdir, Path: "after", Mode: 0o755},
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(len(fds)) // the next open of the walker or the write fails
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	err = c.Call(context.Background(), upstream.OpApply, &upstream.ApplyReq{Ops: ops}, &resp)
	unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	want := []syscall.Errno{syscall.EMFILE, syscall.ECANCELED}
	for i, e := range resp.Errnos {
		if syscall.Errno(e) != want[i] {
			t.Errorf("op %d (kind %d %q): errno %v, want %v", i, ops[i].Kind, ops[i].Path, syscall.Errno(e), want[i])
		}
	}
	if _, err := os.Stat(filepath.Join(export, "after")); err == nil {
		t.Errorf("the op after the failed write was applied")
	}
}

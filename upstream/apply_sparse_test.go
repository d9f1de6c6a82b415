//go:build linux

package upstream_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cachefs/cachefs/upstream"
)

// TestApplyWriteSparse: the server leaves out the pieces of zeros of a
// written file, which stays sparse, yet reads as written: zeros written
// over data replace it, and zeros at the end of a write extend the file
// (an overlay's extent ends so, with the file truncated to nothing
// first).
func TestApplyWriteSparse(t *testing.T) {
	export := t.TempDir()
	old := bytes.Repeat([]byte{0xff}, 256<<10)
	if err := os.WriteFile(filepath.Join(export, "f"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, upstream.ServerOptions{Export: export})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	data := append(append([]byte("head"), make([]byte, 2<<20)...), "tail"...)
	ops := []upstream.WBOp{
		{Kind: upstream.WBWrite, Path: "f", Data: data, First: true, Size: uint64(len(data))},
		{Kind: upstream.WBCreate, Path: "g", Mode: 0o644},
		{Kind: upstream.WBWrite, Path: "g", Data: append([]byte("x"), make([]byte, 1<<20)...), First: true},
	}
	var resp upstream.ApplyResp
	must(t, c, upstream.OpApply, &upstream.ApplyReq{Ops: ops}, &resp)
	for i, e := range resp.Errnos {
		if e != 0 {
			t.Errorf("op %d: %v", i, syscall.Errno(e))
		}
	}
	got, _ := os.ReadFile(filepath.Join(export, "f"))
	if !bytes.Equal(got, data) {
		t.Errorf("f: %d bytes, want %d as written", len(got), len(data))
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(export, "f"), &st); err != nil || st.Blocks*512 > 1<<20 {
		t.Errorf("f: %d bytes allocated (%v), want under 1 MiB", st.Blocks*512, err)
	}
	if fi, err := os.Stat(filepath.Join(export, "g")); err != nil || fi.Size() != 1+1<<20 {
		t.Errorf("g: %v %v, want %d bytes", fi, err, 1+1<<20)
	}
}

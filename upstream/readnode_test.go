//go:build linux

package upstream_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cachefs/cachefs/upstream"
)

// ReadNode reads a regular file by node without a handle, as offered
// at the handshake; other file types and oversized reads are refused.
func TestReadNode(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	if err := os.WriteFile(filepath.Join(ts.export, "f"), []byte("hello world"), 0o400); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	if !c.Has(upstream.FeatReadNode) {
		t.Fatal("the host did not offer FeatReadNode")
	}
	f := lookup(t, c, upstream.RootID, "f")
	var resp upstream.DataResp
	must(t, c, upstream.OpReadNode, &upstream.ReadNodeReq{Node: f.Node, Offset: 6, Size: 100}, &resp)
	if string(resp.Data) != "world" {
		t.Errorf("ReadNode at 6 = %q, want %q", resp.Data, "world")
	}
	must(t, c, upstream.OpReadNode, &upstream.ReadNodeReq{Node: f.Node, Offset: 100, Size: 10}, &resp)
	if len(resp.Data) != 0 {
		t.Errorf("ReadNode past the end = %q, want nothing", resp.Data)
	}
	err := try(c, upstream.OpReadNode, &upstream.ReadNodeReq{Node: f.Node, Size: upstream.MaxIO + 1}, &resp)
	wantErrno(t, "ReadNode over MaxIO", err, syscall.EINVAL)
	d := mkdir(t, c, upstream.RootID, "d")
	err = try(c, upstream.OpReadNode, &upstream.ReadNodeReq{Node: d.Node, Size: 10}, &resp)
	wantErrno(t, "ReadNode of a directory", err, syscall.EINVAL)
	err = try(c, upstream.OpReadNode, &upstream.ReadNodeReq{Node: 999999, Size: 10}, &resp)
	if err == nil {
		t.Error("ReadNode of an unknown node succeeded")
	}
}

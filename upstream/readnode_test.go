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

// ReadNodes reads small regular files whole, many in one message, and
// leaves out what it cannot send: directories, files over Max, unknown
// nodes.
func TestReadNodes(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	files := map[string]string{"a": "alpha", "b": "", "big": "0123456789abcdef"}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ts.export, name), []byte(data), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	if !c.Has(upstream.FeatReadNodes) {
		t.Fatal("the host did not offer FeatReadNodes")
	}
	a, b, big := lookup(t, c, upstream.RootID, "a"), lookup(t, c, upstream.RootID, "b"), lookup(t, c, upstream.RootID, "big")
	d := mkdir(t, c, upstream.RootID, "d")
	var resp upstream.ReadNodesResp
	must(t, c, upstream.OpReadNodes, &upstream.ReadNodesReq{Nodes: []uint64{a.Node, d.Node, big.Node, 999999, b.Node}, Max: 8}, &resp)
	if len(resp.Files) != 2 || resp.Files[0].Node != a.Node || string(resp.Files[0].Data) != "alpha" ||
		resp.Files[0].Size != 5 || resp.Files[0].Mtime != a.Attr.Mtime || resp.Files[1].Node != b.Node || len(resp.Files[1].Data) != 0 {
		t.Errorf("ReadNodes = %+v, want a (alpha, size 5, its mtime %d) and b (empty)", resp.Files, a.Attr.Mtime)
	}
	err := try(c, upstream.OpReadNodes, &upstream.ReadNodesReq{Nodes: make([]uint64, upstream.MaxReadNodes+1), Max: 8}, &resp)
	wantErrno(t, "ReadNodes over MaxReadNodes", err, syscall.EINVAL)
}

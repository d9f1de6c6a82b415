//go:build linux

package upstream_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cachefs/cachefs/upstream"
)

// TestOpsGated: the client sends no op whose feature the host did not
// offer; the call fails with ENOSYS and the host sees nothing of it (an
// older host would close the connection on an op it does not know).
// The ops are served when offered.
func TestOpsGated(t *testing.T) {
	for _, tc := range []struct {
		op        upstream.Op
		feat      uint64
		req, resp any
	}{
		{upstream.OpReadNode, upstream.FeatReadNode, &upstream.ReadNodeReq{Size: 10}, &upstream.DataResp{}},
		{upstream.OpReadNodes, upstream.FeatReadNodes, &upstream.ReadNodesReq{}, &upstream.ReadNodesResp{}},
	} {
		t.Run(tc.op.String(), func(t *testing.T) {
			for _, withheld := range []bool{true, false} {
				opts := upstream.ServerOptions{}
				if withheld {
					opts.WithheldFeatures = tc.feat
				}
				ts := startServer(t, opts)
				if err := os.WriteFile(filepath.Join(ts.export, "f"), []byte("data"), 0o600); err != nil {
					t.Fatal(err)
				}
				c := newClient(t, ts.addr, upstream.ClientOptions{})
				if got := c.Offers(tc.op); got == withheld {
					t.Errorf("withheld %v: Offers %v", withheld, got)
				}
				setNode(tc.req, lookup(t, c, upstream.RootID, "f").Node)
				before := ts.srv.Stats().Requests
				err := c.Call(t.Context(), tc.op, tc.req, tc.resp)
				sent := ts.srv.Stats().Requests - before
				if withheld {
					wantErrno(t, "withheld", err, syscall.ENOSYS)
					if sent != 0 {
						t.Errorf("withheld: the host took %d requests, want 0", sent)
					}
					must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
				} else if err != nil || sent != 1 {
					t.Errorf("offered: %v, the host took %d requests, want success and 1", err, sent)
				}
			}
		})
	}
}

func setNode(req any, node uint64) {
	switch r := req.(type) {
	case *upstream.ReadNodeReq:
		r.Node = node
	case *upstream.ReadNodesReq:
		r.Nodes = []uint64{node}
	}
}

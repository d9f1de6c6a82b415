//go:build linux

package upstream_test

import (
	"testing"

	"github.com/cachefs/cachefs/upstream"
	"github.com/cachefs/cachefs/upstream/hostfs"
)

// TestBackendChoice: the node identity is the one asked for, by option
// or by $CACHEFS_BACKEND, and Stats says which.
func TestBackendChoice(t *testing.T) {
	for _, c := range []struct {
		name string
		env  string
		opt  hostfs.Kind
		want hostfs.Kind
	}{
		{"option portable", "", hostfs.Portable, hostfs.Portable},
		{"env portable", "portable", hostfs.Auto, hostfs.Portable},
		{"option over env", "portable", hostfs.Handles, hostfs.Handles},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(hostfs.EnvKind, c.env)
			srv, err := upstream.NewServer(upstream.ServerOptions{Export: t.TempDir(), Backend: c.opt})
			if c.want == hostfs.Handles && err != nil {
				t.Skipf("no file handles here: %v", err)
			}
			if err != nil {
				t.Fatalf("NewServer: %v", err)
			}
			defer srv.Close()
			if got := srv.Stats().Backend; got != c.want {
				t.Errorf("backend: got %v, want %v", got, c.want)
			}
			if got := upstream.UsesHandles(srv); got != (c.want == hostfs.Handles) {
				t.Errorf("UsesHandles: got %v with backend %v", got, c.want)
			}
		})
	}
	t.Setenv(hostfs.EnvKind, "bogus")
	if _, err := upstream.NewServer(upstream.ServerOptions{Export: t.TempDir()}); err == nil {
		t.Errorf("NewServer with $%s=bogus: no error", hostfs.EnvKind)
	}
}

// TestCaseFoldReported: the hello tells the guest whether the export
// folds case, and only then.
func TestCaseFoldReported(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	if c := newClient(t, ts.addr, upstream.ClientOptions{}); c.Has(upstream.FeatCaseFold) || ts.srv.Stats().CaseFold {
		t.Errorf("a case-sensitive export (%s) reported as folding case", ts.export)
	}
	upstream.SetCaseFold(ts.srv, true)
	if c := newClient(t, ts.addr, upstream.ClientOptions{}); !c.Has(upstream.FeatCaseFold) || !ts.srv.Stats().CaseFold {
		t.Errorf("a case-folding export not reported: Has %v, Stats %v", c.Has(upstream.FeatCaseFold), ts.srv.Stats().CaseFold)
	}
}

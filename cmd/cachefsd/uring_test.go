//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachefs/cachefs/internal/fuseuring"
)

func TestURingFlagRefusesOthers(t *testing.T) {
	g := &guestFlags{uring: "sometimes"}
	if _, _, err := g.useURing(); err == nil || !strings.Contains(err.Error(), "want auto, on or off") {
		t.Errorf("--uring sometimes: %v, want an error naming the choices", err)
	}
	g.uring = "off"
	if on, why, err := g.useURing(); on || why != "--uring off" || err != nil {
		t.Errorf("--uring off: %v, %q, %v; want /dev/fuse because of the flag", on, why, err)
	}
}

// TestLocalTransports: --uring on serves the kernel over the rings (and
// turns enable_uring on, as root), and so does auto, the default, once it
// is on; --uring off serves it over /dev/fuse. The mount works either
// way, and ctl stats says which, and why not io_uring.
func TestLocalTransports(t *testing.T) {
	old, err := os.ReadFile(enableURing)
	if err != nil {
		t.Skipf("no FUSE over io_uring in this kernel: %v", err)
	}
	t.Cleanup(func() { os.WriteFile(enableURing, old, 0) })
	for _, tt := range []struct {
		flags []string
		ring  bool
	}{{[]string{"--uring", "on"}, true}, {[]string{"--uring", "auto"}, true}, {nil, true}, {[]string{"--uring", "off"}, false}} {
		t.Run(strings.Join(append([]string{"flags"}, tt.flags...), "_"), func(t *testing.T) {
			p := newPaths(t)
			startGuest(t, "local", p.mnt, p.ctl, append([]string{"local", "--export", p.export}, tt.flags...)...)
			if tt.ring && fuseuring.Supported() != nil {
				t.Skipf("FUSE over io_uring: %v", fuseuring.Supported())
			}
			for i := range 10 {
				if err := os.WriteFile(filepath.Join(p.mnt, "f"+string(rune('a'+i))), []byte("x"), 0644); err != nil {
					t.Fatalf("WriteFile: %v", err)
				}
			}
			if b, err := os.ReadFile(filepath.Join(p.export, "fj")); err != nil || string(b) != "x" {
				t.Errorf("host fj: %q, %v; want x", b, err)
			}
			st := ctlStats(t, p.ctl)
			if st.URing != tt.ring || (tt.ring && st.RingRequests < 10) || (!tt.ring && st.RingRequests != 0) {
				t.Errorf("served over io_uring %v with %d requests over the rings, want io_uring %v", st.URing, st.RingRequests, tt.ring)
			}
			want := "transport: /dev/fuse (not io_uring: --uring off)"
			if tt.ring {
				want = "transport: io_uring"
			}
			if out := ctlOK(t, p.ctl, "stats"); !strings.Contains(out, want) {
				t.Errorf("ctl stats does not say %q:\n%s", want, out)
			}
		})
	}
}

//go:build linux

package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSecondServeRefused: a second serve on a socket a live serve
// accepts on fails, saying so, and leaves the first reachable.
func TestSecondServeRefused(t *testing.T) {
	p := newPaths(t)
	if err := os.WriteFile(filepath.Join(p.export, "f"), []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	startServe(t, p.export, p.sock, false)
	_, stderr, err := run(30*time.Second, cachefsdBin, "serve", "--export", t.TempDir(), "--listen", "unix://"+p.sock)
	if err == nil || !strings.Contains(stderr, "in use") {
		t.Fatalf("second serve: err %v, stderr %q; want a non-zero exit saying the socket is in use", err, stderr)
	}
	startMount(t, p.sock, p.mnt, p.ctl, "consistent") // a new connection to the first
	if b, err := os.ReadFile(filepath.Join(p.mnt, "f")); err != nil || string(b) != "first" {
		t.Errorf("read through the first server after the second was refused: %q, %v", b, err)
	}
}

// TestSecondCtlRefused: a second guest with the control socket of a live
// one fails, saying so, leaves no mount, and the first still answers.
func TestSecondCtlRefused(t *testing.T) {
	p := newPaths(t)
	startGuest(t, "local", p.mnt, p.ctl, "local", "--export", p.export)
	mnt2 := t.TempDir()
	t.Cleanup(func() { unix.Unmount(mnt2, unix.MNT_DETACH) })
	_, stderr, err := run(30*time.Second, cachefsdBin, "local", "--export", t.TempDir(), "--ctl", p.ctl, mnt2)
	if err == nil || !strings.Contains(stderr, "in use") {
		t.Fatalf("second local: err %v, stderr %q; want a non-zero exit saying the socket is in use", err, stderr)
	}
	if isMounted(t, mnt2) {
		t.Errorf("the refused daemon left %s mounted", mnt2)
	}
	ctlOK(t, p.ctl, "ping")
}

// TestStaleSocketReplaced: the socket of a killed serve is replaced by
// the next serve on the same path.
func TestStaleSocketReplaced(t *testing.T) {
	p := newPaths(t)
	srv := startServe(t, p.export, p.sock, false)
	srv.kill(t)
	if !isSocket(p.sock) {
		t.Fatalf("the killed server's socket is gone; the test needs it left behind")
	}
	srv.out.Write([]byte("--- restarted ---\n"))
	srv.start(t)
	waitFor(t, 10*time.Second, "the new server to accept", func() bool { return accepts(p.sock) || srv.exited() })
	if srv.exited() {
		t.Fatalf("serve over a stale socket exited: %s", srv.out.String())
	}
	startMount(t, p.sock, p.mnt, p.ctl, "consistent")
}

// accepts reports whether something accepts connections on the unix
// socket path.
func accepts(path string) bool {
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
	}
	return err == nil
}

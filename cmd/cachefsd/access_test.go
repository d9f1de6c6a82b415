//go:build linux

package main

// Access control of serve, mount and local: the shared secret, the tcp
// rule and the CID allowlist flags.

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeSecret writes a secret file of mode 0600 and returns its path.
func writeSecret(t *testing.T, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0600); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	return p
}

func TestAccessFlags(t *testing.T) {
	good := writeSecret(t, "0123456789abcdef-secret")
	open := filepath.Join(t.TempDir(), "open")
	os.WriteFile(open, []byte("0123456789abcdef-secret"), 0644)
	tests := []struct {
		name   string
		flags  accessFlags
		listen string
		err    string // "" for none
		cids   []uint32
		secret bool
	}{
		{"tcp without secret", accessFlags{}, "tcp://:7000", "needs --secret-file", nil, false},
		{"tcp insecure", accessFlags{insecureTCP: true}, "tcp://:7000", "", nil, false},
		{"tcp with secret", accessFlags{secretFile: good}, "tcp://127.0.0.1:7000", "", nil, true},
		{"readable secret file", accessFlags{secretFile: open}, "tcp://:7000", "chmod 600", nil, false},
		{"missing secret file", accessFlags{secretFile: open + "-missing"}, "unix:///s", "secret file", nil, false},
		{"unix without secret", accessFlags{}, "unix:///s", "", nil, false},
		{"vsock with secret", accessFlags{secretFile: good}, "vsock://2:5000", "", nil, true},
		{"cids", accessFlags{allowCIDs: "3, 42"}, "vsock://2:5000", "", []uint32{3, 42}, false},
		{"bad cid", accessFlags{allowCIDs: "3,x"}, "vsock://2:5000", "bad CID", nil, false},
		{"cids on unix", accessFlags{allowCIDs: "3"}, "unix:///s", "needs a vsock", nil, false},
		{"cids on tcp", accessFlags{allowCIDs: "3", insecureTCP: true}, "tcp://:7000", "needs a vsock", nil, false},
	}
	for _, tt := range tests {
		secret, cids, err := tt.flags.check(tt.listen)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: got error %v, want %q", tt.name, err, tt.err)
			continue
		}
		if !slices.Equal(cids, tt.cids) || (secret != nil) != tt.secret {
			t.Errorf("%s: got CIDs %v, secret %v; want %v, %v", tt.name, cids, secret != nil, tt.cids, tt.secret)
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServeTCP runs serve on a loopback TCP port with extra flags and
// waits until it accepts connections.
func startServeTCP(t *testing.T, export string, flags ...string) (*daemon, string) {
	t.Helper()
	hostPort := freePort(t)
	_, port, _ := net.SplitHostPort(hostPort)
	argv := append([]string{cachefsdBin, "serve", "--export", export, "--listen", "tcp://:" + port}, flags...)
	d := startDaemon(t, "serve", argv...)
	waitFor(t, 10*time.Second, "the server's port", func() bool {
		c, err := net.Dial("tcp", hostPort)
		if err == nil {
			c.Close()
		}
		return err == nil || d.exited()
	})
	if d.exited() {
		t.Fatalf("serve exited: %s", d.out.String())
	}
	return d, "tcp://" + hostPort
}

// TestServeRefusesOpenTCP: serve will not listen on tcp without a
// secret unless told to.
func TestServeRefusesOpenTCP(t *testing.T) {
	_, stderr, err := run(10*time.Second, cachefsdBin, "serve", "--export", t.TempDir(), "--listen", "tcp://:"+portOf(freePort(t)))
	if err == nil || !strings.Contains(stderr, "--secret-file") {
		t.Errorf("serve on tcp without a secret: got %v, stderr %q; want a refusal naming --secret-file", err, stderr)
	}
	_, stderr, err = run(10*time.Second, cachefsdBin, "serve", "--export", t.TempDir(), "--listen", "unix:///tmp/x", "--allow-cid", "3")
	if err == nil || !strings.Contains(stderr, "vsock") {
		t.Errorf("serve --allow-cid on unix: got %v, stderr %q; want a refusal", err, stderr)
	}
}

func portOf(hostPort string) string {
	_, port, _ := net.SplitHostPort(hostPort)
	return port
}

// TestSecretTCP mounts over tcp with the server's secret, and fails to
// mount, with "authentication failed" on both sides, with another
// secret or none.
func TestSecretTCP(t *testing.T) {
	requireFUSE(t)
	p := newPaths(t)
	secret := writeSecret(t, "the shared secret of TestSecretTCP")
	serve, addr := startServeTCP(t, p.export, "--secret-file", secret)
	startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", addr, "--secret-file", secret)
	if err := os.WriteFile(filepath.Join(p.mnt, "f"), []byte("through tcp"), 0644); err != nil {
		t.Fatalf("WriteFile through the mount: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(p.export, "f")); err != nil || string(got) != "through tcp" {
		t.Errorf("host file: got %q %v", got, err)
	}
	for _, tt := range []struct {
		name  string
		flags []string
	}{
		{"wrong secret", []string{"--secret-file", writeSecret(t, "not the secret of TestSecretTCP")}},
		{"no secret", nil},
	} {
		argv := append([]string{cachefsdBin, "mount", "--upstream", addr, "--ctl", filepath.Join(t.TempDir(), "ctl")}, tt.flags...)
		_, stderr, err := run(20*time.Second, append(argv, t.TempDir())...)
		if err == nil || !strings.Contains(stderr, "authentication failed") {
			t.Errorf("mount with %s: got %v, stderr %q; want authentication failed", tt.name, err, stderr)
		}
	}
	waitFor(t, 5*time.Second, "the server's log of the failures", func() bool {
		return strings.Count(serve.out.String(), "authentication failed") >= 2
	})
	if _, err := os.Stat(filepath.Join(p.mnt, "f")); err != nil {
		t.Errorf("the first mount after the refused ones: %v", err)
	}
}

// TestInsecureTCP serves tcp without a secret when told to.
func TestInsecureTCP(t *testing.T) {
	requireFUSE(t)
	p := newPaths(t)
	_, addr := startServeTCP(t, p.export, "--insecure-tcp")
	startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", addr)
	if err := os.Mkdir(filepath.Join(p.mnt, "d"), 0755); err != nil {
		t.Fatalf("Mkdir through the mount: %v", err)
	}
}

// TestLocalSecret runs local with a secret between its two halves.
func TestLocalSecret(t *testing.T) {
	requireFUSE(t)
	p := newPaths(t)
	secret := writeSecret(t, "the shared secret of TestLocalSecret")
	startGuest(t, "local", p.mnt, p.ctl, "local", "--export", p.export, "--secret-file", secret)
	if err := os.WriteFile(filepath.Join(p.mnt, "f"), []byte("x"), 0644); err != nil {
		t.Fatalf("WriteFile through the mount: %v", err)
	}
}

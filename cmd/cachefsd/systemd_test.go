package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// unitsDir is where the systemd units are, from this package.
const unitsDir = "../../contrib/systemd"

// TestSystemdUnits: systemd-analyze verify accepts each unit of
// contrib/systemd (the binary's path replaced by the one built), with
// no warning, and each tells readiness (Type=notify).
func TestSystemdUnits(t *testing.T) {
	requireTool(t, "systemd-analyze")
	units, err := filepath.Glob(filepath.Join(unitsDir, "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units in %s: %v", unitsDir, err)
	}
	dir := t.TempDir()
	var verify []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\nType=notify\n") {
			t.Errorf("%s: not Type=notify", u)
		}
		text := strings.ReplaceAll(string(b), "/usr/local/bin/cachefsd", cachefsdBin)
		name := filepath.Base(u)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		verify = append(verify, filepath.Join(dir, strings.Replace(name, "@.", "@host_mnt.", 1)))
	}
	out, err := exec.Command("systemd-analyze", append([]string{"verify"}, verify...)...).CombinedOutput()
	if err != nil || strings.Contains(string(out), dir) {
		t.Errorf("systemd-analyze verify %s: %v\n%s", strings.Join(verify, " "), err, out)
	}
}

// TestNotifyReady: serve, volume-plugin and mount, started with
// NOTIFY_SOCKET as systemd starts a unit of Type=notify, send READY=1
// once they answer (serve: a handshake; volume-plugin: a connection;
// mount: the mount serves a file and its control socket a ping), and
// STOPPING=1 on SIGTERM.
func TestNotifyReady(t *testing.T) {
	requireFUSE(t)
	p := newPaths(t)
	if err := os.WriteFile(filepath.Join(p.export, "f"), []byte("ready"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("serve", func(t *testing.T) {
		notify, sock := notifySocket(t), filepath.Join(t.TempDir(), "s")
		d := startDaemon(t, "serve", "env", "NOTIFY_SOCKET="+notify.LocalAddr().String(),
			cachefsdBin, "serve", "--export", p.export, "--listen", "unix://"+sock)
		waitNotify(t, notify, d, "READY=1")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := upstream.NewClient(ctx, upstream.ClientOptions{Addr: "unix://" + sock})
		if err != nil {
			t.Fatalf("handshake with serve once it said READY=1: %v", err)
		}
		c.Close()
		d.cmd.Process.Signal(unix.SIGTERM)
		waitNotify(t, notify, d, "STOPPING=1")
	})
	t.Run("volume-plugin", func(t *testing.T) {
		notify, dir := notifySocket(t), t.TempDir()
		sock := filepath.Join(dir, "cachefs.sock")
		d := startDaemon(t, "volume-plugin", "env", "NOTIFY_SOCKET="+notify.LocalAddr().String(), cachefsdBin,
			"volume-plugin", "--socket", sock, "--mountpoint", p.mnt, "--state", filepath.Join(dir, "volumes.json"))
		waitNotify(t, notify, d, "READY=1")
		if !accepts(sock) {
			t.Errorf("volume-plugin said READY=1, but nothing accepts on %s", sock)
		}
		d.cmd.Process.Signal(unix.SIGTERM)
		waitNotify(t, notify, d, "STOPPING=1")
	})
	t.Run("mount", func(t *testing.T) {
		startServe(t, p.export, p.sock, false)
		notify := notifySocket(t)
		t.Cleanup(func() { unix.Unmount(p.mnt, unix.MNT_DETACH) })
		d := startDaemon(t, "mount", "env", "NOTIFY_SOCKET="+notify.LocalAddr().String(),
			cachefsdBin, "mount", "--upstream", "unix://"+p.sock, "--ctl", p.ctl, p.mnt)
		waitNotify(t, notify, d, "READY=1")
		if b, err := os.ReadFile(filepath.Join(p.mnt, "f")); err != nil || string(b) != "ready" {
			t.Errorf("read through the mount once it said READY=1: %q, %v; want \"ready\"", b, err)
		}
		if _, stderr, err := ctlRun(p.ctl, "ping"); err != nil {
			t.Errorf("ctl ping once the mount said READY=1: %v %s", err, stderr)
		}
		d.cmd.Process.Signal(unix.SIGTERM)
		waitNotify(t, notify, d, "STOPPING=1")
		if !d.wait(10 * time.Second) {
			t.Fatalf("mount still running 10s after SIGTERM")
		}
	})
}

// notifySocket is a notification socket as systemd's, under the test's
// temporary directory.
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatalf("ListenUnixgram: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitNotify waits for a message carrying state on c from daemon d,
// failing if d exits first or none comes within 15s.
func waitNotify(t *testing.T, c *net.UnixConn, d *daemon, state string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	buf := make([]byte, 4096)
	exited := false // then one more read takes what it sent before
	for time.Now().Before(deadline) {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.Read(buf)
		if err != nil {
			if exited {
				break
			}
			exited = d.exited()
			continue
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if line == state {
				return
			}
		}
	}
	t.Fatalf("%s: no %s on NOTIFY_SOCKET (exited: %v)", d.name, state, exited)
}

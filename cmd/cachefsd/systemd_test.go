//go:build linux

package main

import (
	"context"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skipf("systemd-analyze not installed (Debian's systemd package, which scripts/setup.sh leaves alone): %v", err)
	}
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
		wantCleanExit(t, d)
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
		wantCleanExit(t, d)
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
		wantCleanExit(t, d)
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

// unit is what a test runs of a systemd unit: its default environment
// and its commands by key (ExecStartPre, ExecStart, ExecStop).
type unit struct {
	env  map[string]string
	exec map[string][]string
}

// readUnit reads the unit file name of contrib/systemd. The test skips
// where a command the unit runs is missing.
func readUnit(t *testing.T, name string) unit {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(unitsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	u := unit{env: map[string]string{}, exec: map[string][]string{}}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok || strings.HasPrefix(line, "#"):
		case k == "Environment":
			for _, kv := range strings.Fields(v) {
				ek, ev, _ := strings.Cut(kv, "=")
				u.env[ek] = ev
			}
		case strings.HasPrefix(k, "Exec"):
			u.exec[k] = append(u.exec[k], strings.TrimPrefix(v, "-"))
			if cmd := strings.Fields(v)[0]; !strings.HasSuffix(cmd, "/cachefsd") {
				requireTool(t, strings.TrimPrefix(cmd, "-"))
			}
		}
	}
	return u
}

// argv expands a command line as systemd does: ${X} is one word, $X
// as many as it has, %f the instance's path (given) and %i the
// instance; the binary is the one built.
func (u unit) argv(line string, env map[string]string, path, instance string) []string {
	vars := maps.Clone(u.env)
	maps.Copy(vars, env)
	var argv []string
	for _, w := range strings.Fields(line) {
		w = strings.NewReplacer("%f", path, "%i", instance, "/usr/local/bin/cachefsd", cachefsdBin).Replace(w)
		if name, ok := strings.CutPrefix(w, "$"); ok && !strings.HasPrefix(name, "{") {
			argv = append(argv, strings.Fields(vars[name])...)
			continue
		}
		for k, v := range vars {
			w = strings.ReplaceAll(w, "${"+k+"}", v)
		}
		argv = append(argv, w)
	}
	return argv
}

// start runs the unit's ExecStartPre and ExecStart as systemd does for
// a unit of Type=notify, and waits until it says READY=1.
func (u unit) start(t *testing.T, name string, env map[string]string, path, instance string) *daemon {
	t.Helper()
	for _, line := range u.exec["ExecStartPre"] {
		argv := u.argv(line, env, path, instance)
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s ExecStartPre %s: %v\n%s", name, line, err, out)
		}
	}
	notify := notifySocket(t)
	argv := append([]string{"env", "NOTIFY_SOCKET=" + notify.LocalAddr().String()}, u.argv(u.exec["ExecStart"][0], env, path, instance)...)
	d := startDaemon(t, name, argv...)
	waitNotify(t, notify, d, "READY=1")
	return d
}

// stop stops d as systemd stops the unit: its ExecStop commands, then
// SIGTERM if it still runs; it must end with status 0.
func (u unit) stop(t *testing.T, d *daemon) {
	t.Helper()
	env := map[string]string{"MAINPID": strconv.Itoa(d.pid())}
	for _, line := range u.exec["ExecStop"] {
		argv := u.argv(line, env, "", "")
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%s ExecStop %s: %v\n%s", d.name, line, err, out)
		}
	}
	if !d.exited() {
		d.cmd.Process.Signal(unix.SIGTERM)
	}
	wantCleanExit(t, d)
}

// wantCleanExit waits for d, told to stop, to exit with status 0.
func wantCleanExit(t *testing.T, d *daemon) {
	t.Helper()
	if !d.wait(10 * time.Second) {
		t.Fatalf("%s still running 10s after its stop", d.name)
	}
	if st := d.cmd.ProcessState; st.ExitCode() != 0 {
		t.Errorf("%s stopped: %v, want exit status 0", d.name, st)
	}
}

// TestSystemdUnitCommands runs the units' commands as systemd would,
// with settings their environment files could hold: the host server,
// the mount of it (its mountpoint the instance's path), and the volume
// plugin on that mount each say READY=1 and work, and each stops with
// status 0, the mount by its ExecStop.
func TestSystemdUnitCommands(t *testing.T) {
	requireFUSE(t)
	p := newPaths(t)
	if err := os.WriteFile(filepath.Join(p.export, "f"), []byte("unit"), 0o644); err != nil {
		t.Fatal(err)
	}
	serveUnit, mountUnit, pluginUnit := readUnit(t, "cachefsd-serve.service"),
		readUnit(t, "cachefsd-mount@.service"), readUnit(t, "cachefsd-volume-plugin.service")
	srv := serveUnit.start(t, "serve", map[string]string{"CACHEFSD_EXPORT": p.export, "CACHEFSD_LISTEN": "unix://" + p.sock}, "", "")
	mnt := filepath.Join(p.mnt, "host_mnt") // made by ExecStartPre
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	guest := mountUnit.start(t, "mount", map[string]string{"CACHEFSD_UPSTREAM": "unix://" + p.sock, "CACHEFSD_CTL": p.ctl,
		"CACHEFSD_FLAGS": "--default-mode cached"}, mnt, "host_mnt")
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "unit" {
		t.Errorf("read through the unit's mount: %q, %v; want \"unit\"", b, err)
	}
	dir := t.TempDir()
	psock := filepath.Join(dir, "cachefs.sock")
	plugin := pluginUnit.start(t, "volume-plugin", map[string]string{"CACHEFSD_MOUNTPOINT": mnt,
		"CACHEFSD_FLAGS": "--ctl " + p.ctl + " --socket " + psock + " --state " + filepath.Join(dir, "volumes.json")}, "", "")
	c := newPluginClient(t, psock)
	c.volume(epCreate, volumeRequest{Name: "v", Opts: map[string]string{"path": ".", "mode": "cached"}})
	if got := c.volume(epMount, volumeRequest{Name: "v", ID: "c"}).Mountpoint; got != mnt {
		t.Errorf("Mount: %q, want %q", got, mnt)
	}
	c.volume(epUnmount, volumeRequest{Name: "v", ID: "c"})
	c.volume(epRemove, volumeRequest{Name: "v"})
	pluginUnit.stop(t, plugin)
	mountUnit.stop(t, guest)
	if isMounted(t, mnt) {
		t.Errorf("%s still mounted after the unit's stop", mnt)
	}
	serveUnit.stop(t, srv)
}

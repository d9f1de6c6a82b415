//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
)

// pluginClient calls a volume plugin as dockerd does: JSON POSTs over
// its unix socket.
type pluginClient struct {
	t    *testing.T
	http *http.Client
}

func newPluginClient(t *testing.T, sock string) *pluginClient {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &pluginClient{t: t, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// call posts req to endpoint ep, decodes the answer into resp and
// returns the HTTP status.
func (c *pluginClient) call(ep string, req, resp any) int {
	c.t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		c.t.Fatal(err)
	}
	hr, err := http.NewRequest("POST", "http://plugin"+ep, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	hr.Header.Set("Accept", "application/vnd.docker.plugins.v1.2+json")
	r, err := c.http.Do(hr)
	if err != nil {
		c.t.Fatalf("POST %s: %v", ep, err)
	}
	defer r.Body.Close()
	if err := json.NewDecoder(r.Body).Decode(resp); err != nil {
		c.t.Fatalf("POST %s: status %d, answer: %v", ep, r.StatusCode, err)
	}
	return r.StatusCode
}

// volume calls a VolumeDriver endpoint that must succeed.
func (c *pluginClient) volume(ep string, req volumeRequest) volumeResponse {
	c.t.Helper()
	var resp volumeResponse
	if st := c.call(ep, req, &resp); st != http.StatusOK || resp.Err != "" {
		c.t.Fatalf("%s %+v: status %d, Err %q", ep, req, st, resp.Err)
	}
	return resp
}

// volumeErr calls a VolumeDriver endpoint that must fail.
func (c *pluginClient) volumeErr(ep string, req volumeRequest) {
	c.t.Helper()
	var resp volumeResponse
	if st := c.call(ep, req, &resp); st == http.StatusOK || resp.Err == "" {
		c.t.Errorf("%s %+v: status %d, Err %q; want a failure", ep, req, st, resp.Err)
	}
}

// waitDial waits until something accepts on the unix socket path, or d
// exits.
func waitDial(t *testing.T, d *daemon, path string) {
	t.Helper()
	waitFor(t, 15*time.Second, d.name+" accepting on "+path, func() bool { return accepts(path) || d.exited() })
	if d.exited() {
		t.Fatalf("%s exited: %s", d.name, d.out.String())
	}
}

// registrations returns the guest daemon's registrations.
func registrations(t *testing.T, ctl string) []consistency.Registration {
	t.Helper()
	var resp cachefs.CtlResponse
	if err := json.Unmarshal([]byte(ctlOK(t, ctl, "--json", "modes")), &resp); err != nil {
		t.Fatalf("ctl --json modes: %v", err)
	}
	return resp.Registrations
}

// wantRegistration checks that path is registered with mode and refs
// references, or not at all when refs is 0.
func wantRegistration(t *testing.T, ctl, path, mode string, refs int) {
	t.Helper()
	regs := registrations(t, ctl)
	for _, r := range regs {
		if r.Path == path {
			if r.Mode.String() != mode || r.Refs != refs {
				t.Errorf("registration of %s: mode %v, refs %d; want %s, %d", path, r.Mode, r.Refs, mode, refs)
			}
			return
		}
	}
	if refs != 0 {
		t.Errorf("no registration of %s in %+v; want mode %s, refs %d", path, regs, mode, refs)
	}
}

// TestVolumePlugin: the volume plugin, driven as dockerd drives it,
// gives a volume's mounts its subtree of a guest's mount in its mode:
// each mount registers it with the guest daemon, each unmount drops
// that, and so does a remove; the volumes outlive a restart of the
// plugin; bad options fail at create.
func TestVolumePlugin(t *testing.T) {
	p := newPaths(t)
	sub := filepath.Join(p.export, "src", "project")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "f"), []byte("project file"), 0o644); err != nil {
		t.Fatal(err)
	}
	guest := startGuest(t, "local", p.mnt, p.ctl, "local", "--export", p.export)
	waitDial(t, guest, p.ctl)
	dir := t.TempDir()
	sock, state := filepath.Join(dir, "plugins", "cachefs.sock"), filepath.Join(dir, "volumes.json")
	plugin := startDaemon(t, "volume-plugin", cachefsdBin, "volume-plugin", "--socket", sock, "--ctl", p.ctl,
		"--mountpoint", p.mnt, "--state", state)
	waitDial(t, plugin, sock)
	c := newPluginClient(t, sock)

	var act activateResponse
	if c.call(epActivate, struct{}{}, &act); len(act.Implements) != 1 || act.Implements[0] != "VolumeDriver" {
		t.Fatalf("Activate: %+v, want Implements [VolumeDriver]", act)
	}
	var caps capabilitiesResponse
	if c.call(epCapabilities, struct{}{}, &caps); caps.Capabilities.Scope != "local" {
		t.Errorf("Capabilities: %+v, want Scope local", caps)
	}
	t.Run("bad options", func(t *testing.T) {
		c := newPluginClient(t, sock)
		for _, opts := range []map[string]string{
			{"path": "src/project", "mode": "sloppy"},
			{"path": "../outside", "mode": "cached"},
			{"path": "/src/project"},
			{"path": "src/missing"},
			{"path": "src/project/f"},
			{"path": "src/project", "size": "1G"},
		} {
			c.volumeErr(epCreate, volumeRequest{Name: "bad", Opts: opts})
		}
		c.volumeErr(epMount, volumeRequest{Name: "bad", ID: "c0"})
		if l := c.volume(epList, volumeRequest{}); len(l.Volumes) != 0 {
			t.Errorf("List after failed creates: %+v, want none", l.Volumes)
		}
	})

	t.Run("no mode", func(t *testing.T) { // the mount's default: nothing registered
		c := newPluginClient(t, sock)
		c.volume(epCreate, volumeRequest{Name: "src"})
		if got := c.volume(epMount, volumeRequest{Name: "src", ID: "c0"}).Mountpoint; got != filepath.Join(p.mnt, "src") {
			t.Errorf("Mount: %q, want %q", got, filepath.Join(p.mnt, "src"))
		}
		if regs := registrations(t, p.ctl); len(regs) != 0 {
			t.Errorf("a volume without a mode registered %+v", regs)
		}
		c.volume(epUnmount, volumeRequest{Name: "src", ID: "c0"})
		c.volume(epRemove, volumeRequest{Name: "src"})
	})

	want := filepath.Join(p.mnt, "src", "project")
	c.volume(epCreate, volumeRequest{Name: "project", Opts: map[string]string{"path": "src/project", "mode": "cached"}})
	c.volume(epCreate, volumeRequest{Name: "project", Opts: map[string]string{"path": "src/project", "mode": "cached"}})
	c.volumeErr(epCreate, volumeRequest{Name: "project", Opts: map[string]string{"path": "src", "mode": "cached"}})
	wantRegistration(t, p.ctl, "src/project", "cached", 0) // registered by mounts only
	if got := c.volume(epMount, volumeRequest{Name: "project", ID: "c1"}).Mountpoint; got != want {
		t.Fatalf("Mount: Mountpoint %q, want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(want, "f")); err != nil || string(b) != "project file" {
		t.Errorf("read through the volume's mountpoint: %q, %v", b, err)
	}
	wantRegistration(t, p.ctl, "src/project", "cached", 1)
	if !isMounted(t, want) {
		t.Errorf("%s is not mounted: no bind of the cached connection on it", want)
	}
	c.volume(epMount, volumeRequest{Name: "project", ID: "c2"})
	wantRegistration(t, p.ctl, "src/project", "cached", 2)
	if got := c.volume(epPath, volumeRequest{Name: "project"}).Mountpoint; got != want {
		t.Errorf("Path: %q, want %q", got, want)
	}
	g := c.volume(epGet, volumeRequest{Name: "project"}).Volume
	if g == nil || g.Name != "project" || g.Mountpoint != want || g.Status["mode"] != "cached" || g.Status["mounts"] != "2" {
		t.Errorf("Get: %+v, want project at %s, mode cached, 2 mounts", g, want)
	}
	c.volume(epUnmount, volumeRequest{Name: "project", ID: "c1"})
	wantRegistration(t, p.ctl, "src/project", "cached", 1)
	c.volumeErr(epUnmount, volumeRequest{Name: "project", ID: "c1"})

	plugin.stop(t) // the volumes and their mounts outlive it
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("the stopped plugin left its socket %s", sock)
	}
	plugin.start(t)
	waitDial(t, plugin, sock)
	c = newPluginClient(t, sock)
	if l := c.volume(epList, volumeRequest{}).Volumes; len(l) != 1 || l[0].Name != "project" || l[0].Mountpoint != want {
		t.Fatalf("List after a restart: %+v, want project at %s", l, want)
	}
	c.volume(epUnmount, volumeRequest{Name: "project", ID: "c2"})
	wantRegistration(t, p.ctl, "src/project", "cached", 0)

	c.volume(epMount, volumeRequest{Name: "project", ID: "c3"})
	wantRegistration(t, p.ctl, "src/project", "cached", 1)
	c.volume(epRemove, volumeRequest{Name: "project"})
	wantRegistration(t, p.ctl, "src/project", "cached", 0)
	if isMounted(t, want) {
		t.Errorf("%s is still mounted after Remove", want)
	}
	if l := c.volume(epList, volumeRequest{}).Volumes; len(l) != 0 {
		t.Errorf("List after Remove: %+v, want none", l)
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("no volume left, but the state file %s is", state)
	}
	t.Run("guest restarted", func(t *testing.T) { guestRestarted(t, c, guest, p) })
}

// guestRestarted: a mount of a volume from before the guest daemon
// restarted, whose registration id the new daemon gave the same volume's
// registration, leaves that one alone when it is unmounted.
func guestRestarted(t *testing.T, c *pluginClient, guest *daemon, p paths) {
	restartGuest(t, guest, p) // ids from 1
	c.volume(epCreate, volumeRequest{Name: "v", Opts: map[string]string{"path": "src/project", "mode": "cached"}})
	c.volume(epMount, volumeRequest{Name: "v", ID: "before"})
	restartGuest(t, guest, p)
	c.volume(epMount, volumeRequest{Name: "v", ID: "after"})
	if regs := registrations(t, p.ctl); len(regs) != 1 || regs[0].ID != 1 {
		t.Fatalf("registrations %+v, want one, id 1, as the old mount's", regs)
	}
	c.volume(epUnmount, volumeRequest{Name: "v", ID: "before"})
	wantRegistration(t, p.ctl, "src/project", "cached", 1)
	c.volume(epUnmount, volumeRequest{Name: "v", ID: "after"})
	wantRegistration(t, p.ctl, "src/project", "cached", 0)
	c.volume(epRemove, volumeRequest{Name: "v"})
}

// restartGuest stops a guest daemon and starts it again.
func restartGuest(t *testing.T, guest *daemon, p paths) {
	t.Helper()
	guest.stop(t)
	guest.out.Write([]byte("--- restarted ---\n"))
	guest.start(t)
	waitMounted(t, guest, p.mnt, p.ctl)
}

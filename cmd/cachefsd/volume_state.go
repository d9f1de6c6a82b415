//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
)

// volume is a Docker volume of the plugin: a subtree of the guest's
// mount, in a mode.
type volume struct {
	Path   string                 // clean, relative to the mountpoint
	Mode   string                 `json:",omitempty"` // "": the mount's default, nothing registered
	Mounts map[string]volumeMount `json:",omitempty"` // by Docker's mount id
}

// volumeMount is a mount of a volume: its registration, if it has a
// mode, and the guest daemon that holds it (daemonID).
type volumeMount struct {
	Reg    uint64 `json:",omitempty"`
	Daemon string `json:",omitempty"`
}

// volumes are the plugin's volumes, kept in a file across restarts of
// the plugin (and of dockerd, which asks List). Each mount of a volume
// with a mode holds a registration of the guest daemon (which counts
// the references of one path and mode); its unmount drops it.
type volumes struct {
	file string // immutable: where they are kept, removed when none is left
	mnt  string // immutable: the guest's mountpoint
	ctl  string // immutable: the guest daemon's control socket

	mu   sync.Mutex // protects vols and the file
	vols map[string]*volume
}

// loadVolumes returns the volumes kept in file, if it exists.
func loadVolumes(file, mnt, ctl string) (*volumes, error) {
	v := &volumes{file: file, mnt: mnt, ctl: ctl, vols: map[string]*volume{}}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &v.vols); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return v, nil
}

// saveLocked writes the volumes to the file, or removes it when there
// are none. Needs mu.
func (v *volumes) saveLocked() error {
	if len(v.vols) == 0 {
		if err := os.Remove(v.file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(v.vols, "", "\t")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(v.file), 0o700); err != nil {
		return err
	}
	tmp := v.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, v.file)
}

// newVolume checks the options of `docker volume create -o`: path (a
// directory relative to the mountpoint; default: the volume's name) and
// mode (consistent, cached or delegated; default: the mount's).
func (v *volumes) newVolume(name string, opts map[string]string) (*volume, error) {
	vol := &volume{Path: name}
	for k, val := range opts {
		switch k {
		case "path":
			vol.Path = val
		case "mode":
			m, err := consistency.ParseMode(val)
			if err != nil {
				return nil, err
			}
			if m != consistency.Default {
				vol.Mode = m.String()
			}
		default:
			return nil, fmt.Errorf("unknown option %q (options: path, mode)", k)
		}
	}
	p := filepath.Clean(vol.Path)
	if filepath.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
		return nil, fmt.Errorf("path %q: must be relative to the mount %s, and under it", vol.Path, v.mnt)
	}
	vol.Path = p
	if fi, err := os.Stat(filepath.Join(v.mnt, p)); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", filepath.Join(v.mnt, p))
	}
	return vol, nil
}

// create adds a volume; creating it again with the same options is
// allowed, as dockerd may.
func (v *volumes) create(name string, opts map[string]string) error {
	if name == "" {
		return fmt.Errorf("a volume needs a name")
	}
	vol, err := v.newVolume(name, opts)
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.vols[name]; ok {
		if old.Path != vol.Path || old.Mode != vol.Mode {
			return fmt.Errorf("volume %s exists, with path %s and mode %q", name, old.Path, old.Mode)
		}
		return nil
	}
	v.vols[name] = vol
	return v.saveLocked()
}

// getLocked returns volume name. Needs mu.
func (v *volumes) getLocked(name string) (*volume, error) {
	vol, ok := v.vols[name]
	if !ok {
		return nil, fmt.Errorf("no volume %s", name)
	}
	return vol, nil
}

// remove drops a volume, and the registrations of mounts dockerd did not
// unmount.
func (v *volumes) remove(name string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	vol, err := v.getLocked(name)
	if err != nil {
		return err
	}
	for id := range vol.Mounts {
		v.unregisterLocked(name, vol, id)
	}
	delete(v.vols, name)
	return v.saveLocked()
}

// mount registers the volume's subtree with its mode for the mount id
// and returns where it is.
func (v *volumes) mount(name, id string) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	vol, err := v.getLocked(name)
	if err != nil {
		return "", err
	}
	if _, ok := vol.Mounts[id]; ok {
		return v.pathOf(vol), nil
	}
	var m volumeMount
	if vol.Mode != "" {
		req := &cachefs.CtlRequest{Cmd: "register", Mode: vol.Mode, Path: v.pathOf(vol)}
		resp, err := ctlCallChecked(v.ctl, req, func(c net.Conn) (err error) {
			m.Daemon, err = daemonID(c)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("registering %s as %s with the guest daemon (%s): %w", v.pathOf(vol), vol.Mode, v.ctl, err)
		}
		m.Reg = resp.ID
	}
	if vol.Mounts == nil {
		vol.Mounts = map[string]volumeMount{}
	}
	vol.Mounts[id] = m
	return v.pathOf(vol), v.saveLocked()
}

// unmount drops the registration of the mount id.
func (v *volumes) unmount(name, id string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	vol, err := v.getLocked(name)
	if err != nil {
		return err
	}
	if _, ok := vol.Mounts[id]; !ok {
		return fmt.Errorf("volume %s has no mount %s", name, id)
	}
	v.unregisterLocked(name, vol, id)
	return v.saveLocked()
}

// unregisterLocked forgets mount id of vol and drops its registration,
// if the guest daemon that holds it still runs: one started since has
// its own registrations, numbered anew. Needs mu.
func (v *volumes) unregisterLocked(name string, vol *volume, id string) {
	m := vol.Mounts[id]
	delete(vol.Mounts, id)
	if m.Reg == 0 {
		return
	}
	req := &cachefs.CtlRequest{Cmd: "unregister", ID: m.Reg}
	_, err := ctlCallChecked(v.ctl, req, func(c net.Conn) error {
		if d, err := daemonID(c); err != nil || d != m.Daemon {
			return fmt.Errorf("the guest daemon (%s) was restarted since the mount (%s): %v", d, m.Daemon, err)
		}
		return nil
	})
	if err != nil {
		log.Printf("cachefsd: volume %s: unregistering %d: %v", name, m.Reg, err)
	}
}

// pathOf returns where vol is in the guest.
func (v *volumes) pathOf(vol *volume) string { return filepath.Join(v.mnt, vol.Path) }

// path returns where volume name is.
func (v *volumes) path(name string) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	vol, err := v.getLocked(name)
	if err != nil {
		return "", err
	}
	return v.pathOf(vol), nil
}

// info describes volume name.
func (v *volumes) info(name string) (*volumeInfo, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	vol, err := v.getLocked(name)
	if err != nil {
		return nil, err
	}
	return v.infoLocked(name, vol), nil
}

// infoLocked describes vol: its path, mode and mounts. Needs mu.
func (v *volumes) infoLocked(name string, vol *volume) *volumeInfo {
	mode := vol.Mode
	if mode == "" {
		mode = "the mount's default"
	}
	return &volumeInfo{Name: name, Mountpoint: v.pathOf(vol), Status: map[string]string{
		"path": vol.Path, "mode": mode, "mounts": strconv.Itoa(len(vol.Mounts))}}
}

// list describes every volume, by name.
func (v *volumes) list() []*volumeInfo {
	v.mu.Lock()
	defer v.mu.Unlock()
	var infos []*volumeInfo
	for _, name := range slices.Sorted(maps.Keys(v.vols)) {
		infos = append(infos, v.infoLocked(name, v.vols[name]))
	}
	return infos
}

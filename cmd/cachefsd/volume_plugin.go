//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/cachefs/cachefs/upstream"
)

// volumePluginFlags are volume-plugin's flags.
type volumePluginFlags struct {
	socket, ctl, mnt, state string
}

// newVolumePluginFlags returns volume-plugin's flag set, which fills vf.
func newVolumePluginFlags() (*flag.FlagSet, *volumePluginFlags) {
	fl := flag.NewFlagSet("volume-plugin", flag.ExitOnError)
	vf := &volumePluginFlags{}
	fl.StringVar(&vf.socket, "socket", "/run/docker/plugins/cachefs.sock", "unix socket dockerd finds the plugin on (its name is the driver's)")
	fl.StringVar(&vf.ctl, "ctl", defaultCtlSocket(), "control socket of the guest daemon (mount's --ctl)")
	fl.StringVar(&vf.mnt, "mountpoint", "", "where the guest daemon mounts the host's export (required)")
	fl.StringVar(&vf.state, "state", filepath.Join(defaultStateDir(), "volumes.json"), "file the volumes are kept in across restarts")
	setUsage(fl, "volume-plugin --mountpoint DIR [flags]")
	return fl, vf
}

// volumePlugin serves Docker's volume plugin protocol: a volume is a
// subtree of a guest daemon's mount, which each mount of it registers
// with the volume's mode.
func volumePlugin(args []string) error {
	fl, vf := newVolumePluginFlags()
	fl.Parse(args)
	if vf.mnt == "" {
		return fmt.Errorf("volume-plugin needs --mountpoint")
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("volume-plugin takes no arguments, got %q (flags go first)", fl.Args())
	}
	mnt, err := filepath.Abs(vf.mnt)
	if err != nil {
		return err
	}
	vols, err := loadVolumes(vf.state, mnt, vf.ctl)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(vf.socket), 0o755); err != nil {
		return err
	}
	l, err := upstream.Listen("unix://" + vf.socket)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: pluginHandler(vols)}
	stopOnSignal(func() { notifySystemd("STOPPING=1"); srv.Close() })
	notifySystemd("READY=1")
	log.Printf("cachefsd: ready: volume plugin on %s, volumes of %s (control socket %s)", vf.socket, mnt, vf.ctl)
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// pluginHandler answers the protocol's endpoints (volume_api.go).
func pluginHandler(v *volumes) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+epActivate, func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, activateResponse{Implements: []string{"VolumeDriver"}})
	})
	mux.HandleFunc("POST "+epCapabilities, func(w http.ResponseWriter, r *http.Request) {
		var c capabilitiesResponse
		c.Capabilities.Scope = "local"
		reply(w, http.StatusOK, c)
	})
	for ep, f := range map[string]func(*volumeRequest, *volumeResponse) error{
		epCreate:  func(q *volumeRequest, _ *volumeResponse) error { return v.create(q.Name, q.Opts) },
		epRemove:  func(q *volumeRequest, _ *volumeResponse) error { return v.remove(q.Name) },
		epUnmount: func(q *volumeRequest, _ *volumeResponse) error { return v.unmount(q.Name, q.ID) },
		epMount: func(q *volumeRequest, a *volumeResponse) (err error) {
			a.Mountpoint, err = v.mount(q.Name, q.ID)
			return err
		},
		epPath: func(q *volumeRequest, a *volumeResponse) (err error) {
			a.Mountpoint, err = v.path(q.Name)
			return err
		},
		epGet: func(q *volumeRequest, a *volumeResponse) (err error) {
			a.Volume, err = v.info(q.Name)
			return err
		},
		epList: func(_ *volumeRequest, a *volumeResponse) error {
			a.Volumes = v.list()
			return nil
		},
	} {
		mux.HandleFunc("POST "+ep, volumeEndpoint(ep, f))
	}
	return mux
}

// volumeEndpoint decodes a request (an empty body is an empty request),
// runs f and answers, with status 500 and Err if f fails.
func volumeEndpoint(ep string, f func(*volumeRequest, *volumeResponse) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var q volumeRequest
		var a volumeResponse
		if err := json.NewDecoder(r.Body).Decode(&q); err != nil && !errors.Is(err, io.EOF) {
			a.Err = fmt.Sprintf("bad request: %v", err)
			reply(w, http.StatusBadRequest, a)
			return
		}
		if err := f(&q, &a); err != nil {
			log.Printf("cachefsd: %s %s: %v", ep, q.Name, err)
			a.Err = err.Error()
			reply(w, http.StatusInternalServerError, a)
			return
		}
		reply(w, http.StatusOK, a)
	}
}

// reply writes the answer v.
func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", pluginContentType)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

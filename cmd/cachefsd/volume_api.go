//go:build linux

package main

// The messages of Docker's volume plugin protocol (VolumeDriver), JSON
// over HTTP POSTs on a unix socket, as dockerd sends them to
// /run/docker/plugins/NAME.sock: one request and one response type per
// endpoint. A failed call is answered with status 500 and Err set.

// pluginContentType is the content type of the protocol's answers.
const pluginContentType = "application/vnd.docker.plugins.v1.1+json"

// The endpoints.
const (
	epActivate     = "/Plugin.Activate"
	epCreate       = "/VolumeDriver.Create"
	epRemove       = "/VolumeDriver.Remove"
	epMount        = "/VolumeDriver.Mount"
	epUnmount      = "/VolumeDriver.Unmount"
	epPath         = "/VolumeDriver.Path"
	epGet          = "/VolumeDriver.Get"
	epList         = "/VolumeDriver.List"
	epCapabilities = "/VolumeDriver.Capabilities"
)

// activateResponse answers /Plugin.Activate.
type activateResponse struct {
	Implements []string
}

// volumeRequest is the request of Create (Opts: `docker volume create
// -o`), Remove, Mount and Unmount (ID: the container's mount), Path and
// Get.
type volumeRequest struct {
	Name string
	Opts map[string]string `json:",omitempty"`
	ID   string            `json:",omitempty"`
}

// volumeResponse answers every endpoint of VolumeDriver but
// Capabilities; each fills the fields it has.
type volumeResponse struct {
	Mountpoint string        `json:",omitempty"`
	Volume     *volumeInfo   `json:",omitempty"`
	Volumes    []*volumeInfo `json:",omitempty"`
	Err        string
}

// volumeInfo describes a volume to Get and List.
type volumeInfo struct {
	Name       string
	Mountpoint string            `json:",omitempty"`
	Status     map[string]string `json:",omitempty"`
}

// capabilitiesResponse answers /VolumeDriver.Capabilities.
type capabilitiesResponse struct {
	Capabilities struct{ Scope string }
}

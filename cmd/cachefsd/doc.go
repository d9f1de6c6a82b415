// Command cachefsd is the cachefs daemon: `serve` exports host
// directories, `mount` mounts one in a guest, `local` runs both in one
// process, `volume-plugin` serves Docker volumes of a mount, and `ctl`
// talks to a running guest daemon's control socket (stats, ping, modes,
// register, unregister, flush). See the README.
//
// # Files
//
//   - main.go, usage.go, version.go: commands, the usage made from their
//     flag sets, --version.
//   - serve.go, access.go: the host side.
//   - mount.go: the guest side's flags, mount and local.
//   - guest_check.go: the guest's arguments, checked before anything
//     connects or mounts.
//   - guest_run.go: a mounted guest until it ends: control socket,
//     metrics (metrics.go), readiness (notify.go), stopping in steps on
//     signals (holders.go names who keeps a mount busy), and what is
//     left afterwards (guest_state.go: the default state directory goes
//     unless it keeps changes not written back).
//   - mount_helper.go: mount.fuse.cachefs, for mount(8) and fstab;
//     contrib/systemd: the units of serve and mount (Type=notify).
//   - ctl.go: the control client.
//   - volume_api.go, volume_plugin.go, volume_state.go, volume_peer.go:
//     volume-plugin, Docker's volume plugin protocol; a volume is a
//     subtree of a mount, registered with its mode by ctl requests while
//     containers mount it, each registration tied to the guest daemon
//     that holds it (its pid and start time, from the control socket).
//   - uring.go: --uring.
//
// Unix sockets a live process accepts on are refused, stale ones
// replaced (upstream.Listen).
package main

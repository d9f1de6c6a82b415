// Command cachefsd is the cachefs daemon: `serve` exports host
// directories, `mount` mounts one in a guest, `local` runs both in one
// process, and `ctl` talks to a running guest daemon's control socket
// (stats, ping, modes, register, unregister, flush). See the README.
package main

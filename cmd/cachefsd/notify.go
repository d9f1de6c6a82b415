package main

import (
	"log"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Readiness, told once the mount is up and the control socket answers
// (serve: once it listens):
//
//   - to systemd, by sd_notify's READY=1 on $NOTIFY_SOCKET (a unit of
//     Type=notify, contrib/systemd), and STOPPING=1 on the first stop
//     signal;
//   - to the mount helper (mount_helper.go) that started the daemon in
//     the background, by "ready\n" on the descriptor $CACHEFSD_READY_FD,
//     after the daemon has moved its output to $CACHEFSD_LOG (or
//     /dev/null): the helper, which held the other end of that output to
//     report a failed start, exits then.
const (
	readyFDEnv = "CACHEFSD_READY_FD"
	logEnv     = "CACHEFSD_LOG"
)

// notifyReady tells whoever waits that the daemon is ready.
func notifyReady() {
	notifySystemd("READY=1")
	if fd, err := strconv.Atoi(os.Getenv(readyFDEnv)); err == nil && fd > 2 {
		os.Unsetenv(readyFDEnv)
		detachOutput(os.Getenv(logEnv))
		f := os.NewFile(uintptr(fd), "ready")
		f.WriteString("ready\n")
		f.Close()
	}
}

// notifySystemd sends state to systemd if it runs the daemon as a unit
// of Type=notify.
func notifySystemd(state string) {
	if sock := os.Getenv("NOTIFY_SOCKET"); sock != "" {
		if err := sdNotify(sock, state); err != nil {
			log.Printf("cachefsd: sd_notify %s: %v", state, err)
		}
	}
}

// sdNotify sends state to systemd's notification socket.
func sdNotify(sock, state string) error {
	if sock[0] == '@' {
		sock = "\x00" + sock[1:] // abstract namespace
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}

// detachOutput moves stdout and stderr to the file logPath (appended)
// or, without one, to /dev/null.
func detachOutput(logPath string) {
	path, flags := os.DevNull, os.O_WRONLY
	if logPath != "" {
		path, flags = logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		log.Printf("cachefsd: log %s: %v; logging to /dev/null", path, err)
		if f, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			return
		}
	}
	defer f.Close()
	unix.Dup2(int(f.Fd()), 1)
	unix.Dup2(int(f.Fd()), 2)
}

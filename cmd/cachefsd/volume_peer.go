//go:build linux

package main

import (
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// daemonID names the process that accepted the unix connection c, the
// guest daemon a registration was made with, as "pid:start time": a
// daemon started since, even under the same pid, has another.
func daemonID(c net.Conn) (string, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return "", fmt.Errorf("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return "", err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return "", err
	}
	if credErr != nil {
		return "", fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cred.Pid))
	if err != nil {
		return "", err
	}
	// After the command in parentheses: state (field 3) ... starttime (22).
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields after the command", cred.Pid, len(f))
	}
	return fmt.Sprintf("%d:%s", cred.Pid, f[19]), nil
}

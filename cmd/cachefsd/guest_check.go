//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// checkGuestArgs checks what a guest command (mount, local) was given
// besides its flags: its required flag req (value val) and one
// mountpoint, an existing directory, before anything connects or
// mounts.
func checkGuestArgs(cmd, req, val string, args []string) error {
	switch {
	case val == "":
		return fmt.Errorf("%s needs --%s (flags go before the mountpoint)", cmd, req)
	case len(args) == 0:
		return fmt.Errorf("%s needs a mountpoint", cmd)
	case len(args) > 1:
		return fmt.Errorf("%s takes one mountpoint, got %d: %s (flags go before the mountpoint)",
			cmd, len(args), strings.Join(args, " "))
	}
	return checkMountpoint(args[0])
}

// checkMountpoint fails, naming the path, unless mnt is a directory. A
// dead mount on it, whose daemon was killed, is detached first.
func checkMountpoint(mnt string) error {
	fi, err := os.Stat(mnt)
	if isDeadMount(err) {
		fi, err = replaceDeadMount(mnt)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("mountpoint %s does not exist", mnt)
	case err != nil:
		return fmt.Errorf("mountpoint: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("mountpoint %s is not a directory", mnt)
	}
	return nil
}

// isDeadMount reports whether err is what a FUSE mount whose daemon is
// gone answers: ENOTCONN, or ECONNABORTED for a request it aborted.
func isDeadMount(err error) bool {
	return errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED)
}

// replaceDeadMount detaches the dead mount on mnt, which nothing serves,
// and stats what it covered.
func replaceDeadMount(mnt string) (os.FileInfo, error) {
	err := unix.Unmount(mnt, unix.MNT_DETACH)
	if err == unix.EPERM {
		err = fusermountU(mnt, unix.MNT_DETACH) // a user's mount, made by fusermount
	}
	if err != nil {
		return nil, fmt.Errorf("mountpoint %s: a dead mount (its daemon is gone) that cannot be detached: %w", mnt, err)
	}
	log.Printf("cachefsd: detached the dead mount on %s (its daemon is gone)", mnt)
	return os.Stat(mnt)
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
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

// checkMountpoint fails, naming the path, unless mnt is a directory.
func checkMountpoint(mnt string) error {
	fi, err := os.Stat(mnt)
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

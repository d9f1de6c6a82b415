package main

import (
	"errors"
	"flag"
)

// The guest commands mount a FUSE file system of a Linux guest
// (cachefs, FUSE over io_uring, inotify actuation): on macOS only the
// host's serve runs.
var errGuestLinuxOnly = errors.New("mount, local and ctl are guest commands: they run on Linux only")

func mount([]string) error { return errGuestLinuxOnly }
func local([]string) error { return errGuestLinuxOnly }
func ctl([]string) error   { return errGuestLinuxOnly }

type guestFlags struct{}

func (*guestFlags) register(*flag.FlagSet) {}

func newCtlFlags() (fl *flag.FlagSet, sock *string, asJSON *bool) {
	return flag.NewFlagSet("ctl", flag.ContinueOnError), new(string), new(bool)
}

func ctlUsage(*flag.FlagSet) string { return "ctl: Linux only\n" }

// The Docker volume plugin registers subtrees with the guest daemon:
// it runs in the guest.
func volumePlugin([]string) error {
	return errors.New("volume-plugin is a guest command: it runs on Linux only")
}

func newVolumePluginFlags() (*flag.FlagSet, struct{}) {
	return flag.NewFlagSet("volume-plugin", flag.ContinueOnError), struct{}{}
}

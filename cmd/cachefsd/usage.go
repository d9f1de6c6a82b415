package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// The usage is made from the flag sets the commands parse with, so that
// it lists every flag.

const usageHead = `usage:
  cachefsd serve --export DIR --listen ADDR [serve flags]
  cachefsd mount --upstream ADDR [guest flags] MOUNTPOINT
  cachefsd local --export DIR [guest flags] MOUNTPOINT
  cachefsd ctl [--socket PATH] [--json] COMMAND
  cachefsd volume-plugin --mountpoint DIR [volume-plugin flags]
  cachefsd version, cachefsd --version
  cachefsd mount-helper ADDR MOUNTPOINT [-sfnv] [-o OPTIONS]
      (mount.fuse.cachefs, as mount -t fuse.cachefs runs it; OPTIONS are
      guest flags by name, mode= for --default-mode, log=PATH)

serve exports a host directory; mount mounts one in a guest; local runs
both in one process; ctl talks to a running mount or local;
volume-plugin serves Docker volumes of subtrees of a mount, each in its mode.
`

const usageTail = `
ADDR is unix:///path, tcp://host:port, vsock://cid:port or hvsock:///path:port.
A tcp host left empty (tcp://:port) is 127.0.0.1. serve refuses a tcp ADDR
without --secret-file unless --insecure-tcp is given; mount and local prove
the same secret, given by their --secret-file. Flags go before MOUNTPOINT.
`

// usage returns the top-level usage.
func usage() string {
	var b strings.Builder
	b.WriteString(usageHead)
	fls := commandFlags()
	b.WriteString("\nserve flags:\n")
	printFlags(&b, fls[0])
	b.WriteString("\nguest flags (mount and local):\n")
	printFlags(&b, fls[1])
	b.WriteString("\nvolume-plugin flags:\n")
	printFlags(&b, fls[3])
	b.WriteString("\n")
	b.WriteString(ctlUsage(fls[2]))
	b.WriteString(usageTail)
	return b.String()
}

// commandFlags returns the flag sets of serve, of the guest commands
// (mount's, with local's --export), of ctl and of volume-plugin.
func commandFlags() []*flag.FlagSet {
	serve, _ := newServeFlags()
	guest := guestFlagSet()
	guest.String("upstream", "", "mount: host server address (required)")
	guest.String("export", "", "local: directory to export (required)")
	ctl, _, _ := newCtlFlags()
	plugin, _ := newVolumePluginFlags()
	return []*flag.FlagSet{serve, guest, ctl, plugin}
}

// guestFlagSet returns the flags mount and local share.
func guestFlagSet() *flag.FlagSet {
	fl := flag.NewFlagSet("mount and local", flag.ContinueOnError)
	(&guestFlags{}).register(fl)
	return fl
}

// printFlags prints the flags of fl, with two dashes, each with its
// usage and default.
func printFlags(w io.Writer, fl *flag.FlagSet) {
	fl.VisitAll(func(f *flag.Flag) {
		arg, use := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if arg != "" {
			fmt.Fprintf(w, " %s", arg)
		}
		fmt.Fprintf(w, "\n    \t%s", use)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// setUsage makes fl's -h print the command line cmd and its flags.
func setUsage(fl *flag.FlagSet, cmd string) {
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "usage: cachefsd %s\n\nflags:\n", cmd)
		printFlags(fl.Output(), fl)
	}
}

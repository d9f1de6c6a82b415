package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The mount helper. mount(8) mounts a file system of type fuse.cachefs
// (`mount -t fuse.cachefs ADDR /host_mnt -o mode=cached`, or an fstab
// line) by running /sbin/mount.fuse.cachefs as mount.fuse3 is run:
//
//	mount.fuse.cachefs ADDR MOUNTPOINT [-sfnv] [-N NS] [-o OPTIONS] [-t TYPE]
//
// cachefsd answers that when invoked by that name (a symlink) or as
// `cachefsd mount-helper ...`. OPTIONS are mount's guest flags by name
// (mode=MODE for --default-mode, link-delay=50us, ctl=PATH,
// state-dir=DIR, secret-file=PATH, uring=auto, debug, ...), log=PATH
// for the daemon's output (else it goes to /dev/null), and the generic
// mount options, which are ignored. The helper starts `cachefsd mount`
// in the background, in a session of its own, and exits once it is
// ready (notify.go), or with its error.

// helperNames are the names by which the binary is the mount helper.
var helperNames = []string{"mount.fuse.cachefs", "mount.cachefs"}

func isMountHelper(argv0 string) bool {
	for _, n := range helperNames {
		if filepath.Base(argv0) == n {
			return true
		}
	}
	return false
}

// helperArgs is what mount(8) asked of the helper.
type helperArgs struct {
	source, mnt    string
	flags          []string // for `cachefsd mount`
	logPath        string
	fake, sloppy   bool
	verbose        bool
	positional     []string
	optionsStrings []string
}

func mountHelper(args []string) error {
	h, err := parseHelperArgs(args)
	if err != nil || h.fake {
		return err
	}
	return h.start()
}

// parseHelperArgs parses mount(8)'s arguments to a helper.
func parseHelperArgs(args []string) (*helperArgs, error) {
	h := &helperArgs{}
	for i := 0; i < len(args); i++ {
		if err := h.arg(args, &i); err != nil {
			return nil, err
		}
	}
	if len(h.positional) != 2 {
		return nil, fmt.Errorf("usage: mount.fuse.cachefs ADDR MOUNTPOINT [-sfnv] [-o OPTIONS]")
	}
	h.source, h.mnt = h.positional[0], h.positional[1]
	for _, o := range h.optionsStrings {
		for _, kv := range strings.Split(o, ",") {
			if err := h.option(kv); err != nil {
				return nil, err
			}
		}
	}
	return h, nil
}

// arg takes args[*i], and its value if it has one.
func (h *helperArgs) arg(args []string, i *int) error {
	a := args[*i]
	switch {
	case a == "-o" || a == "-t" || a == "-N":
		if *i+1 >= len(args) {
			return fmt.Errorf("%s needs a value", a)
		}
		*i++
		if a == "-o" {
			h.optionsStrings = append(h.optionsStrings, args[*i])
		}
	case strings.HasPrefix(a, "-o"):
		h.optionsStrings = append(h.optionsStrings, a[2:])
	case strings.HasPrefix(a, "-") && len(a) > 1:
		return h.shortFlags(a[1:])
	default:
		h.positional = append(h.positional, a)
	}
	return nil
}

// shortFlags takes mount's -s (sloppy), -f (fake), -n (no mtab) and -v.
func (h *helperArgs) shortFlags(fs string) error {
	for _, c := range fs {
		switch c {
		case 's':
			h.sloppy = true
		case 'f':
			h.fake = true
		case 'v':
			h.verbose = true
		case 'n':
		default:
			return fmt.Errorf("unknown flag -%c", c)
		}
	}
	return nil
}

// option takes one mount option.
func (h *helperArgs) option(kv string) error {
	k, v, hasValue := strings.Cut(kv, "=")
	switch {
	case kv == "" || ignoredOption(k):
		return nil
	case k == "log":
		h.logPath = v
		return nil
	case k == "ro":
		return errors.New("option ro: an export is read-only when the host serves it so (serve --read-only)")
	case k == "mode":
		k = "default-mode"
	}
	f := guestFlagSet().Lookup(k)
	switch {
	case f == nil && h.sloppy:
		return nil
	case f == nil:
		return fmt.Errorf("unknown option %q", kv)
	case !hasValue && !isBoolFlag(f):
		return fmt.Errorf("option %s needs a value (%s=...)", k, k)
	case !hasValue:
		h.flags = append(h.flags, "--"+k)
	default:
		h.flags = append(h.flags, "--"+k+"="+v)
	}
	return nil
}

// ignoredOption reports the generic mount options: mount(8)'s own, and
// those that cachefs sets itself.
func ignoredOption(k string) bool {
	switch k {
	case "rw", "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group",
		"_netdev", "nofail", "suid", "nosuid", "dev", "nodev", "exec", "noexec",
		"async", "sync", "atime", "noatime", "relatime", "strictatime", "diratime", "nodiratime",
		"lazytime", "comment", "allow_other", "default_permissions":
		return true
	}
	return strings.HasPrefix(k, "x-")
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// start runs `cachefsd mount` in the background and waits until it is
// ready or has exited.
func (h *helperArgs) start() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer ready.Close()
	argv := append(append([]string{"mount", "--upstream", h.source}, h.flags...), h.mnt)
	cmd := exec.Command(self, argv...)
	cmd.ExtraFiles = []*os.File{readyW} // fd 3
	cmd.Env = append(os.Environ(), readyFDEnv+"=3", logEnv+"="+h.logPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := h.output(cmd)
	if err != nil {
		return err
	}
	err = cmd.Start()
	readyW.Close()
	cmd.Stdout.(io.Closer).Close()
	if err != nil {
		return err
	}
	if b, _ := io.ReadAll(ready); string(b) == "ready\n" {
		return nil
	}
	err = cmd.Wait()
	return fmt.Errorf("cachefsd mount of %s at %s failed (%v):\n%s", h.source, h.mnt, err, out.wait())
}

// output gives cmd a pipe for its output until it is ready, and returns
// what came through it (shown as it comes with -v).
func (h *helperArgs) output(cmd *exec.Cmd) (*collected, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	c := &collected{done: make(chan struct{})}
	var dst io.Writer = &c.buf
	if h.verbose {
		dst = io.MultiWriter(&c.buf, os.Stderr)
	}
	go func() {
		io.Copy(dst, r)
		r.Close()
		close(c.done)
	}()
	return c, nil
}

// collected is a daemon's output before it was ready.
type collected struct {
	buf  bytes.Buffer // written until done is closed
	done chan struct{}
}

func (c *collected) wait() string {
	<-c.done
	return strings.TrimSpace(c.buf.String())
}

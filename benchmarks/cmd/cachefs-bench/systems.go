package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A system is one way for a workload to reach a directory: the native
// directory itself or a mount of it.
type system struct {
	Name  string
	About string
	// Tool is the executable the system needs, looked up in the bin
	// directory and then in PATH; empty for native.
	Tool string
	// Default puts the system in the default --systems set.
	Default bool
	// Args are the daemon's arguments after the tool name; {export},
	// {mnt} and {ctl} are replaced.
	Args []string
	// Ctl marks a cachefs daemon, which has a control socket.
	Ctl bool
	// LinkDelay is a cachefs daemon's --link-delay.
	LinkDelay string
	// Register, for a cachefs daemon, registers the mount's root with
	// this mode through ctl once it serves: the mode's own connection.
	Register string
	// prepare, if set, runs once before the first mount and returns
	// Args (sshfs starts its sshd).
	prepare func(r *runner, s *system) ([]string, error)
	// roots are processes besides the daemon whose CPU and memory count
	// (sshfs's sshd).
	roots []int
}

// systems is the table of every system the suite knows, in report order;
// the default set is every one of them (issue #6 asks for every mode at
// both link delays).
var systems = []system{
	{Name: "native", About: "the directory itself, no FUSE", Default: true},
	{Name: "loopback", About: "go-fuse loopback, 1 s entry/attr timeouts, no passthrough: FUSE cost alone",
		Tool: "loopback", Default: true, Args: []string{"{mnt}", "{export}"}},
	cachefsSystem("consistent", "0", true),
	cachefsSystem("consistent", "50us", true),
	cachefsSystem("cached", "0", true),
	cachefsSystem("cached", "50us", true),
	cachefsSystem("delegated", "0", true),
	cachefsSystem("delegated", "50us", true),
	cachefsConnSystem("cached", "50us"),
	defaultModeSystem("cached", "50us", false),
	defaultModeSystem("delegated", "50us", false),
	cachefsNoXattrSystem("50us"),
	floorSystem("fuse-floor-cached", "the read floor: fuse-floor -seed, opens and opendirs ENOSYS as on the cached connection", "-noopen"),
	floorSystem("fuse-floor-cached-noxattr", "fuse-floor-cached with xattrs ENOSYS too", "-noopen", "-noxattr"),
	cachefsRingSystem("consistent", "50us"),
	cachefsRingSystem("cached", "50us"),
	cachefsRingSystem("delegated", "50us"),
	{Name: "bindfs", About: "bindfs (libfuse, default options)", Tool: "bindfs", Default: true,
		Args: []string{"-f", "--no-allow-other", "{export}", "{mnt}"}},
	{Name: "sshfs", About: "sshfs to 127.0.0.1 (sshd started by the suite)", Tool: "sshfs", Default: true,
		prepare: prepareSSH},
}

// cachefsSystem serves the kernel over /dev/fuse (--uring off; the
// daemon's default, auto, takes io_uring where the kernel has it). A
// cached or delegated system is what a user of the mode gets: a
// consistent mount whose root is registered with the mode once it
// serves (ctl register --mode), as a container runtime registers a
// subtree: the cached connection (docs/connections.md), an overlay
// (docs/overlay.md). Before 2026-12-04 these names meant --default-mode
// M, nothing registered: one connection, FUSE delegated; that is
// cachefs-defaultmode-M-DELAY now.
func cachefsSystem(mode, delay string, def bool) system {
	s := defaultModeSystem("consistent", delay, def)
	s.Name = "cachefs-" + mode + "-" + delay
	if mode == "consistent" {
		return s
	}
	s.About = fmt.Sprintf("cachefsd local --link-delay %s --uring off, the root registered %s (%s)", delay, mode,
		map[string]string{"cached": "the cached connection", "delegated": "an overlay"}[mode])
	s.Register = mode
	return s
}

// defaultModeSystem serves the whole mount in mode (--default-mode),
// nothing registered; delegated is FUSE delegated (--overlay=false:
// --default-mode delegated alone makes the root an overlay, as
// cachefs-delegated-DELAY measures).
func defaultModeSystem(mode, delay string, def bool) system {
	args := []string{"local", "--export", "{export}", "--ctl", "{ctl}", "--link-delay", delay, "--default-mode", mode}
	if mode == "delegated" {
		args = append(args, "--overlay=false")
	}
	return system{
		Name:      "cachefs-defaultmode-" + mode + "-" + delay,
		About:     fmt.Sprintf("cachefsd local, %s --uring off", strings.Join(args[5:], " ")),
		Tool:      "cachefsd",
		Default:   def,
		Ctl:       true,
		LinkDelay: delay,
		Args:      append(args, "--uring", "off", "{mnt}"),
	}
}

// cachefsRingSystem serves it over FUSE over io_uring (--uring on, which
// turns the fuse module's enable_uring on).
func cachefsRingSystem(mode, delay string) system {
	s := cachefsSystem(mode, delay, true)
	s.Name += "-uring"
	s.About = strings.Replace(s.About, "--uring off", "--uring on", 1)
	s.Args[len(s.Args)-2] = "on"
	return s
}

// cachefsConnSystem is the old name of cachefs-MODE-DELAY (the mode's
// own connection), kept for the commands in docs/.
func cachefsConnSystem(mode, delay string) system {
	s := cachefsSystem(mode, delay, false)
	s.Name = "cachefs-" + mode + "conn-" + delay
	return s
}

// cachefsNoXattrSystem is the cached connection without xattrs
// (--cached-xattrs=false).
func cachefsNoXattrSystem(delay string) system {
	s := cachefsSystem("cached", delay, true)
	s.Name = "cachefs-cachednoxattr-" + delay
	s.About += ", --cached-xattrs=false"
	s.Args = append(s.Args[:len(s.Args)-1:len(s.Args)-1], "--cached-xattrs=false", "{mnt}")
	return s
}

// floorSystem is fuse-floor serving a copy of the export from memory
// (benchmarks/cmd/fuse-floor/seed.go) with flags: no go-fuse file system
// with the same kernel settings answers a read workload faster.
func floorSystem(name, about string, flags ...string) system {
	args := append(flags, "-seed", "{export}", "-scratch", os.TempDir(), "{mnt}")
	return system{Name: name, About: about, Tool: "fuse-floor", Args: args}
}

// quickSystems is the default set of --quick: the default systems that
// need no tool from outside the repository.
var quickSystems = []string{"native", "loopback", "cachefs-consistent-0", "cachefs-consistent-50us",
	"cachefs-cached-50us", "cachefs-delegated-50us"}

func findSystem(name string) (*system, error) {
	for i := range systems {
		if systems[i].Name == name {
			return &systems[i], nil
		}
	}
	return nil, fmt.Errorf("unknown system %q", name)
}

// toolPath finds a tool in the bin directory or PATH.
func (r *runner) toolPath(name string) (string, error) {
	p := filepath.Join(r.cfg.Bin, name)
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return p, nil
	}
	return exec.LookPath(name)
}

// available says why a system cannot run here, or "" if it can.
func (r *runner) available(s *system) string {
	if s.Tool == "" {
		return ""
	}
	if _, err := r.toolPath(s.Tool); err != nil {
		return fmt.Sprintf("%s not found (run benchmarks/run.sh to install it)", s.Tool)
	}
	if s.prepare != nil {
		args, err := s.prepare(r, s)
		if err != nil {
			return err.Error()
		}
		s.Args = args
		s.prepare = nil
	}
	return ""
}

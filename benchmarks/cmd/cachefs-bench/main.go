// Command cachefs-bench measures workloads on the native disk, on a
// go-fuse loopback mount and on cachefs (and optionally bindfs and
// sshfs), side by side in one run. benchmarks/run.sh installs what it
// needs, builds the daemons and runs it; see docs/benchmarks.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// config is the command line. Zero values are filled by defaults().
type config struct {
	Quick     bool
	Runs      int
	Systems   string        // comma separated; "default" or "all"
	Workloads string        // comma separated; "default" or "all"
	Work      string        // scratch: inputs, exports, mountpoints, logs
	Bin       string        // cachefsd and loopback; then PATH
	Out       string        // results.{json,csv,md}, chart.svg
	Docs      string        // markdown file whose results section is rewritten
	Publish   string        // directory that gets chart.svg and results.csv for the docs
	Timeout   time.Duration // limit of one phase
	// RepeatBelow: a cell whose first run took longer is not repeated.
	RepeatBelow time.Duration
	// Settle: the pause after a system's files are deleted (trash.go).
	Settle   time.Duration
	Command  string // the command line recorded in the report
	Revision string // the cachefs revision measured
	From     string // results.json to render again instead of measuring
}

func main() {
	var c config
	flag.BoolVar(&c.Quick, "quick", false, "small inputs, one run: a check for CI, under 2 minutes")
	flag.IntVar(&c.Runs, "runs", 0, "runs per cell (default 3, or 1 with --quick)")
	flag.StringVar(&c.Systems, "systems", "default", "comma-separated systems, \"default\" or \"all\": "+systemNames())
	flag.StringVar(&c.Workloads, "workloads", "default", "comma-separated workloads, \"default\" (all; with --quick, "+
		"all that need no network) or \"all\": "+workloadNames())
	flag.StringVar(&c.Work, "work", "/var/tmp/cachefs-bench", "work directory on the disk under test")
	flag.StringVar(&c.Bin, "bin", "", "directory holding cachefsd and loopback (default WORK/bin)")
	flag.StringVar(&c.Out, "out", "benchmarks/out", "output directory")
	flag.StringVar(&c.Docs, "docs", "", "markdown file whose results section to regenerate")
	flag.StringVar(&c.Publish, "publish", "", "directory to copy chart.svg and results.csv to, linked from --docs")
	flag.DurationVar(&c.Timeout, "timeout", 0, "limit of one phase; slower cells show as >LIMIT (default 2m)")
	flag.DurationVar(&c.RepeatBelow, "repeat-below", 45*time.Second, "run a cell again only if its first run took less")
	flag.DurationVar(&c.Settle, "settle", -1, "pause after deleting a system's files, so the next system's creates do not pay for them (default 5m30s, 0 with --quick)")
	flag.StringVar(&c.Command, "command", "", "command line to record (default: this one)")
	flag.StringVar(&c.From, "from", "", "render this results.json again (to --out, --docs, --publish) without measuring")
	flag.StringVar(&c.Revision, "revision", "", "cachefs revision to record (default: git describe --always --dirty)")
	flag.Parse()
	c.defaults()
	r, err := newRunner(c)
	switch {
	case err != nil:
	case c.From != "":
		err = r.render(c.From)
	default:
		err = r.run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cachefs-bench:", err)
		os.Exit(1)
	}
}

func (c *config) defaults() {
	if c.Runs == 0 {
		c.Runs = 3
		if c.Quick {
			c.Runs = 1
		}
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.Settle < 0 {
		c.Settle = 330 * time.Second
		if c.Quick {
			c.Settle = 0
		}
	}
	if c.Bin == "" {
		c.Bin = c.Work + "/bin"
	}
	if c.Revision == "" {
		out, _ := exec.Command("git", "describe", "--always", "--dirty").Output()
		c.Revision = strings.TrimSpace(string(out))
	}
	if c.Command == "" {
		c.Command = strings.Join(os.Args, " ")
	}
}

func systemNames() string {
	var n []string
	for _, s := range systems {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

func workloadNames() string {
	var n []string
	for _, w := range workloads {
		n = append(n, w.Name)
	}
	return strings.Join(append(n, visibilityName), ",")
}

//go:build linux

package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
)

// ctlCommands are ctl's subcommands, for its usage.
var ctlCommands = []struct{ use, what string }{
	{"stats", "requests by op with latencies, caches, host events, write-back"},
	{"ping", "a round trip to the host"},
	{"modes", "the registrations: id, mode, path, references"},
	{"register --mode MODE PATH", "give the subtree at PATH (relative: to the working directory) a mode: consistent, cached or delegated; prints its id"},
	{"unregister ID", "drop a registration; a delegated subtree's last one is written back first"},
	{"flush [PATH]", "write delegated changes back, waiting for the host"},
}

// newCtlFlags returns ctl's flag set and its flags.
func newCtlFlags() (fl *flag.FlagSet, sock *string, asJSON *bool) {
	fl = flag.NewFlagSet("ctl", flag.ExitOnError)
	sock = fl.String("socket", defaultCtlSocket(), "control socket path")
	asJSON = fl.Bool("json", false, "print the raw JSON answer")
	fl.Usage = func() { fmt.Fprint(fl.Output(), ctlUsage(fl)) }
	return fl, sock, asJSON
}

// ctlUsage returns ctl's usage: its subcommands and flags.
func ctlUsage(fl *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("usage: cachefsd ctl [--socket PATH] [--json] COMMAND\n\ncommands:\n")
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range ctlCommands {
		fmt.Fprintf(w, "  %s\t%s\n", c.use, c.what)
	}
	w.Flush()
	b.WriteString("\nflags:\n")
	printFlags(&b, fl)
	return b.String()
}

func ctl(args []string) error {
	fl, sock, asJSON := newCtlFlags()
	fl.Parse(args)
	if fl.NArg() < 1 {
		return fmt.Errorf("ctl needs a command\n%s", ctlUsage(fl))
	}
	if fl.Arg(0) == "help" {
		fmt.Print(ctlUsage(fl))
		return nil
	}
	req, err := ctlRequest(fl.Args())
	if err != nil {
		return err
	}
	resp, err := ctlCall(*sock, req)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(resp)
	}
	printCtl(req, resp)
	return nil
}

func ctlRequest(args []string) (*cachefs.CtlRequest, error) {
	req := &cachefs.CtlRequest{Cmd: args[0]}
	if !slices.ContainsFunc(ctlCommands, func(c struct{ use, what string }) bool {
		return strings.Fields(c.use)[0] == args[0]
	}) {
		fl, _, _ := newCtlFlags()
		return nil, fmt.Errorf("unknown ctl command %q\n%s", args[0], ctlUsage(fl))
	}
	switch args[0] {
	case "register":
		fl := flag.NewFlagSet("register", flag.ExitOnError)
		mode := fl.String("mode", "", "consistent, cached or delegated")
		fl.Parse(args[1:])
		if fl.NArg() != 1 || *mode == "" {
			return nil, fmt.Errorf("usage: ctl register --mode MODE PATH")
		}
		if _, err := consistency.ParseMode(*mode); err != nil {
			return nil, fmt.Errorf("register: %w", err)
		}
		path, err := registerPath(fl.Arg(0))
		if err != nil {
			return nil, err
		}
		req.Mode, req.Path = *mode, path
	case "flush":
		if len(args) > 2 {
			return nil, fmt.Errorf("usage: ctl flush [PATH]")
		}
		if len(args) == 2 {
			req.Path = args[1]
		}
	case "unregister":
		if len(args) != 2 {
			return nil, fmt.Errorf("usage: ctl unregister ID")
		}
		id, err := strconv.ParseUint(args[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad id %q", args[1])
		}
		req.ID = id
	}
	return req, nil
}

// registerPath resolves a path given to register against the caller's
// working directory (the daemon resolves only absolute ones, against its
// mountpoint) and checks that it exists.
func registerPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	return abs, nil
}

// ctlCall sends one request to a daemon's control socket.
func ctlCall(sock string, req *cachefs.CtlRequest) (*cachefs.CtlResponse, error) {
	return ctlCallChecked(sock, req, nil)
}

// ctlCallChecked is ctlCall, but check, unless nil, sees the connection
// first: its error is returned, and the request is not sent.
func ctlCallChecked(sock string, req *cachefs.CtlRequest, check func(net.Conn) error) (*cachefs.CtlResponse, error) {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("no guest daemon answers on %s (is `cachefsd mount` running with --ctl %s? ctl --socket names another): %w", sock, sock, err)
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if check != nil {
		if err := check(c); err != nil {
			return nil, err
		}
	}
	c.SetDeadline(time.Now().Add(10 * time.Minute))
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, err
	}
	var resp cachefs.CtlResponse
	sc := bufio.NewScanner(c)
	sc.Buffer(nil, 64<<20)
	if !sc.Scan() {
		return nil, fmt.Errorf("no answer from %s: %v", sock, sc.Err())
	}
	if err := json.Unmarshal(sc.Bytes(), &resp); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("%s", resp.Error)
	}
	return &resp, nil
}

func printCtl(req *cachefs.CtlRequest, resp *cachefs.CtlResponse) {
	switch req.Cmd {
	case "ping":
		fmt.Printf("round trip %v\n", time.Duration(resp.PingNs))
	case "register":
		fmt.Println(resp.ID)
	case "flush":
		fmt.Println("everything is on the host")
	case "modes":
		if len(resp.Registrations) == 0 {
			fmt.Println("nothing registered: every path has the default mode (mount's --default-mode)")
		}
		for _, r := range resp.Registrations {
			fmt.Printf("%d\t%s\t/%s\t(refs %d)\n", r.ID, r.Mode, r.Path, r.Refs)
		}
	case "stats":
		printStats(resp.Stats)
	}
}

func printStats(st *cachefs.Stats) {
	u := st.Upstream
	fmt.Printf("messages sent %d, received %d; outstanding %d; nodes %d, handles %d\n",
		u.Sent, u.Received, u.Outstanding, st.Nodes, st.Handles)
	c := st.Cache
	fmt.Printf("cache: %d hits, %d misses, %d fills dropped, %d invalidations; %d dirs, %d attrs held\n",
		c.Hits, c.Misses, c.Dropped, c.Invalidations, c.Dirs, c.Attrs)
	if wb := st.Writeback; wb.Sent+wb.Pending > 0 || len(wb.Failures) > 0 {
		fmt.Printf("write-back: %d pending, %d sent in %d batches, %d retries, %d conflicts, %d failures; %d passthrough opens, %d creates took a ready staging file\n",
			wb.Pending, wb.Sent, wb.Batches, wb.Retries, wb.Conflicts, len(wb.Failures), wb.Passthrough, wb.ReadyCreates)
		for _, f := range wb.Failures {
			fmt.Printf("  failed: %s %s: %s\n", f.Op, f.Path, f.Errno)
		}
		if f := wb.Stalled; f != nil {
			fmt.Printf("  stalled: %s %s: %s (kept; sent again when the host has space)\n", f.Op, f.Path, f.Errno)
		}
	}
	e := st.Events
	fmt.Printf("host events: %d batches, %d events, %d overflows, %d actuated (%d failed); visibility p50 %v p90 %v p99 %v max %v\n",
		e.Batches, e.Events, e.Overflows, e.Actuated, e.ActuateErrors, e.P50, e.P90, e.P99, e.P100)
	printOverlays(st)
	fmt.Print("main connection: ")
	printConn(st)
	if c := st.Cached; c != nil {
		fmt.Printf("cached connection (locks guest-local): %d nodes; cache %d hits, %d misses; ", c.Nodes, c.Cache.Hits, c.Cache.Misses)
		printConn(c)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "op\tcount\tp50\tp90\tp98\tp100\t")
	for _, o := range u.Ops {
		fmt.Fprintf(w, "%s\t%d\t%v\t%v\t%v\t%v\t\n", o.Op, o.Count, o.P50, o.P90, o.P98, o.P100)
	}
	w.Flush()
}

// printOverlays prints how delegated registrations are served: as
// overlays, with their write-back counters, or by FUSE and why.
func printOverlays(st *cachefs.Stats) {
	if st.OverlaysOff != "" && len(st.Overlays) == 0 {
		fmt.Printf("delegated registrations: FUSE (not overlays: %s)\n", st.OverlaysOff)
		return
	}
	fmt.Printf("delegated registrations: overlays, %d mounted", len(st.Overlays))
	if st.OverlaysOff != "" {
		fmt.Printf(" (one fell back to FUSE: %s)", st.OverlaysOff)
	}
	fmt.Println()
	for _, o := range st.Overlays {
		fmt.Printf("  overlay /%s: %d passes, %d ops, %d bytes written back, %d retries, %d failures, %d conflicts; %d directories went quiet\n",
			o.Path, o.Passes, o.Ops, o.Bytes, o.Retries, o.Failures, o.Conflicts, o.Quieted)
	}
}

// printConn prints a connection's transport and FUSE requests.
func printConn(st *cachefs.Stats) {
	switch {
	case st.URing:
		fmt.Printf("transport: io_uring, %d requests over the rings, %d handed off; ", st.RingRequests, st.HandOffs)
	case st.URingOff != "":
		fmt.Printf("transport: /dev/fuse (not io_uring: %s); ", st.URingOff)
	default:
		fmt.Print("transport: /dev/fuse; ")
	}
	printKernel(st.Kernel)
}

// printKernel prints the FUSE requests by opcode, most frequent first.
func printKernel(ops []cachefs.KernelOp) {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b cachefs.KernelOp) int { return cmp.Compare(b.Count, a.Count) })
	var total uint64
	parts := make([]string, 0, len(ops))
	for _, o := range ops {
		total += o.Count
		parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(o.Op), o.Count))
	}
	fmt.Printf("kernel requests %d: %s\n", total, strings.Join(parts, ", "))

}

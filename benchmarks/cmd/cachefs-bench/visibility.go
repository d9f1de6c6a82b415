package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// visibilityName selects, in --workloads, the host-change visibility
// measurement: cmd/visibility run once per link delay of the selected
// cachefs systems, after the cells. A file in a cached subtree is
// rewritten on the host and polled in the guest until it reads the new
// content; idle, then while the host extracts the untar workload's
// tarball in a loop into the same subtree.
const visibilityName = "visibility"

// visResult is one phase of one cmd/visibility run; times in seconds.
type visResult struct {
	LinkDelay          string
	Phase              string // "idle", "under untar"
	Samples            int
	Lost               int // changes not seen within 10 s, counted as 10 s
	P50, P90, P99, Max float64
	Err                string `json:",omitempty"`
}

// visOutput is what cmd/visibility -json prints.
type visOutput struct {
	Tar    string
	Phases []struct {
		Name               string
		Samples, Lost      int
		P50, P90, P99, Max float64
	}
	Events struct {
		Batches, Events, Overflows uint64
		P50, P90, P99, Max         float64
	}
}

// measureVisibility runs cmd/visibility at each link delay.
func (r *runner) measureVisibility() {
	delays := r.linkDelays()
	if len(delays) == 0 {
		r.notef("visibility: not measured, no cachefs system selected")
	}
	for _, d := range delays {
		if r.isStopped() {
			return
		}
		r.rep.Visibility = append(r.rep.Visibility, r.runVisibility(d)...)
	}
}

// linkDelays lists the link delays of the selected cachefs systems.
func (r *runner) linkDelays() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range r.systems {
		if s.LinkDelay != "" && !seen[s.LinkDelay] {
			seen[s.LinkDelay] = true
			out = append(out, s.LinkDelay)
		}
	}
	return out
}

func (r *runner) runVisibility(delay string) []visResult {
	fail := func(err error) []visResult {
		r.logf("visibility at link delay %s: %v", delay, err)
		return []visResult{{LinkDelay: delay, Phase: "idle", Err: err.Error()}}
	}
	tool, err := r.toolPath("visibility")
	if err != nil {
		return fail(fmt.Errorf("visibility not found (benchmarks/run.sh builds it): %v", err))
	}
	tarball, err := r.inputTar()
	if err != nil {
		return fail(err)
	}
	work := filepath.Join(r.cfg.Work, "run", "visibility")
	defer r.cleanVisibility(work)
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.cfg.Timeout+time.Minute)
	r.setCancel(cancel)
	defer func() { r.setCancel(nil); cancel() }()
	r.logf("visibility at link delay %s: %d samples per phase", delay, r.size.VisSamples)
	cmd := exec.CommandContext(ctx, tool, "-json", "-samples", fmt.Sprint(r.size.VisSamples),
		"-link-delay", delay, "-tar", tarball, "-work", work)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fail(fmt.Errorf("%v: %s", err, firstLines(stderr.String(), 3)))
	}
	var v visOutput
	if err := json.Unmarshal(out, &v); err != nil {
		return fail(fmt.Errorf("reading its output: %v", err))
	}
	return r.visResults(delay, &v)
}

func (r *runner) visResults(delay string, v *visOutput) []visResult {
	var res []visResult
	for _, p := range v.Phases {
		x := visResult{LinkDelay: delay, Phase: p.Name, Samples: p.Samples, Lost: p.Lost,
			P50: p.P50, P90: p.P90, P99: p.P99, Max: p.Max}
		r.logf("visibility %-6s %-12s p50 %s p90 %s p99 %s max %s lost %d", delay, p.Name,
			ms(p.P50), ms(p.P90), ms(p.P99), ms(p.Max), p.Lost)
		res = append(res, x)
	}
	e := v.Events
	r.notef("visibility at link delay %s: the host extracted %s under load; the guest's event stats: "+
		"%d batches, %d events, %d overflows, latency from host change to invalidation p50 %s p99 %s max %s ms",
		delay, filepath.Base(v.Tar), e.Batches, e.Events, e.Overflows, ms(e.P50), ms(e.P99), ms(e.Max))
	return res
}

// cleanVisibility unmounts what a killed cmd/visibility left and
// removes its work directory.
func (r *runner) cleanVisibility(work string) {
	for _, p := range mountsUnder(work) {
		exec.Command("umount", "-l", p).Run()
	}
	os.RemoveAll(work)
}

// ms formats seconds as milliseconds.
func ms(s float64) string {
	switch v := s * 1000; {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// visibilityTable renders the visibility results.
func (rep *report) visibilityTable(b *strings.Builder) {
	if len(rep.Visibility) == 0 {
		return
	}
	fmt.Fprintf(b, "\nHost-change visibility (`benchmarks/cmd/visibility`, %d changes per phase): a file in a cached "+
		"subtree is rewritten on the host and read in the guest every 200 us until the new content shows; "+
		"\"under untar\" while the host extracts the untar workload's tarball in a loop into the same subtree. "+
		"Milliseconds:\n\n", rep.Sizes.VisSamples)
	b.WriteString("| link delay | phase | samples | p50 | p90 | p99 | max | not seen in 10 s |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, v := range rep.Visibility {
		if v.Err != "" {
			fmt.Fprintf(b, "| %s | %s | error | | | | | |\n", v.LinkDelay, v.Phase)
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s | %d |\n", v.LinkDelay, v.Phase, v.Samples,
			ms(v.P50), ms(v.P90), ms(v.P99), ms(v.Max), v.Lost)
	}
}

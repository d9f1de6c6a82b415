package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// result is one measured phase of one run.
type result struct {
	System, Workload, Phase string
	Run                     int
	Wall                    float64          // seconds
	CPU                     float64          // daemon utime+stime, seconds; -1: no daemon
	Sent                    int64            // upstream messages sent; -1: not cachefs
	Ops                     map[string]int64 `json:",omitempty"` // upstream messages by op
	Kernel                  int64            `json:",omitempty"` // FUSE requests from the kernel (cachefs only)
	KernelOps               map[string]int64 `json:",omitempty"` // FUSE requests by opcode
	HWM                     int64            // daemon peak RSS (VmHWM), bytes
	Load                    float64          // one-minute load average at the start
	Summary                 string           // what the phase saw; must agree across systems
	TimedOut                bool             `json:",omitempty"` // stopped at the phase limit
	Err                     string           `json:",omitempty"`
}

type skipped struct{ System, Reason string }

type skippedWorkload struct{ Workload, Reason string }

// report is everything results.json holds.
type report struct {
	Date      string
	Kernel    string
	Nproc     int
	Size      string
	Sizes     sizes
	Runs      int
	Command   string
	Revision  string
	LoadStart float64
	LoadEnd   float64
	Systems   []string // measured, in order
	Phases    []string // in order
	Skipped   []skipped
	Notes     []string
	Results   []result
	// SkippedWorkloads are those whose input could not be made.
	SkippedWorkloads []skippedWorkload `json:",omitempty"`
	// Visibility holds cmd/visibility's results, per link delay.
	Visibility []visResult `json:",omitempty"`
	Finished   bool
}

func newReport(r *runner) report {
	rep := report{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Nproc: runtime.NumCPU(),
		Size: r.sizeName(), Sizes: r.size, Runs: r.cfg.Runs, Command: r.cfg.Command,
		Revision: r.cfg.Revision}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		rep.Kernel = strings.TrimSpace(string(out))
	}
	rep.Phases = phaseNames(r.workloads)
	return rep
}

func phaseNames(ws []*workload) []string {
	var out []string
	for _, w := range ws {
		for _, p := range w.Phases {
			out = append(out, p.Name)
		}
	}
	return out
}

// cell aggregates the runs of one phase on one system.
type cell struct {
	System, Phase    string
	N                int
	Median, Min, Max float64
	CPU              float64 // median; -1: no daemon
	Sent             int64   // median; -1: not cachefs
	Kernel           int64   // median FUSE requests; 0: not counted
	HWM              int64   // max
	Load             float64 // mean
	Summary          string
	TimedOut         bool // the phase was stopped: Median is a lower bound
	Err              string
	Mismatch         string // the reference summary this cell disagrees with
	VsNative         float64
	VsLoopback       float64
}

// cells aggregates the results, phase by phase in report order.
func (rep *report) cells() []cell {
	var out []cell
	for _, ph := range rep.Phases {
		var row []cell
		for _, sys := range rep.Systems {
			if c, ok := rep.aggregate(sys, ph); ok {
				row = append(row, c)
			}
		}
		compare(row)
		out = append(out, row...)
	}
	return out
}

func (rep *report) aggregate(sys, ph string) (cell, bool) {
	c := cell{System: sys, Phase: ph, CPU: -1, Sent: -1}
	var walls, cpus []float64
	var sents, kernel []int64
	seen := false
	for _, x := range rep.Results {
		if x.System != sys || x.Phase != ph {
			continue
		}
		seen = true
		if x.Err != "" {
			if c.Err == "" {
				c.Err = fmt.Sprintf("run %d failed after %.1fs: %s", x.Run, x.Wall, x.Err)
			}
			continue
		}
		if x.TimedOut {
			c.TimedOut = true
		} else if c.Summary == "" {
			c.Summary = x.Summary
		}
		walls = append(walls, x.Wall)
		cpus = append(cpus, x.CPU)
		sents = append(sents, x.Sent)
		kernel = append(kernel, x.Kernel)
		c.HWM = max(c.HWM, x.HWM)
		c.Load += x.Load
	}
	if c.N = len(walls); c.N > 0 {
		c.Median, c.Min, c.Max = median(walls), minOf(walls), maxOf(walls)
		c.CPU, c.Load = median(cpus), c.Load/float64(c.N)
		c.Sent, c.Kernel = medianInt(sents), medianInt(kernel)
	}
	return c, seen
}

// compare fills the ratios and summary mismatches of one phase's row.
// minRef is the shortest reference time a ratio is given against: below
// it (a flush with nothing to do) the ratio says nothing.
const minRef = 0.001

func compare(row []cell) {
	var native, loop float64
	ref := ""
	for _, c := range row {
		if c.N > 0 && ref == "" && !c.TimedOut {
			ref = c.Summary
		}
		switch {
		case c.N > 0 && c.System == "native":
			native = c.Median
		case c.N > 0 && c.System == "loopback":
			loop = c.Median
		}
	}
	for i := range row {
		c := &row[i]
		if c.N == 0 {
			continue
		}
		if native >= minRef {
			c.VsNative = c.Median / native
		}
		if loop >= minRef {
			c.VsLoopback = c.Median / loop
		}
		if c.Summary != ref && !c.TimedOut {
			c.Mismatch = ref
		}
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// render loads a saved results.json and writes it out again.
func (r *runner) render(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	r.rep = report{}
	if err := json.Unmarshal(b, &r.rep); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return r.rep.write(r)
}

// write saves results.json, results.csv, results.md and chart.svg, and
// the docs section and published copies when asked.
func (rep *report) write(r *runner) error {
	cells := rep.cells()
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	md := rep.markdown(cells, "")
	files := map[string][]byte{
		"results.json": js,
		"results.csv":  csvBytes(cells),
		"results.md":   []byte(md),
		"chart.svg":    chartSVG(rep, cells),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(r.cfg.Out, name), b, 0o644); err != nil {
			return err
		}
	}
	if r.cfg.Publish != "" {
		os.MkdirAll(r.cfg.Publish, 0o755)
		for _, name := range []string{"results.csv", "chart.svg", "results.json"} {
			if err := os.WriteFile(filepath.Join(r.cfg.Publish, name), files[name], 0o644); err != nil {
				return err
			}
		}
	}
	if r.cfg.Docs != "" {
		return rep.updateDocs(r, cells)
	}
	return nil
}

func medianInt(v []int64) int64 {
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[len(v)/2]
}

package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runner runs the suite. Only the main goroutine touches its fields but
// mu's; the signal handler uses mu's.
type runner struct {
	cfg       config
	size      sizes
	systems   []*system
	workloads []*workload
	seq       int
	sshd      *mount
	trashed   int // runs' outputs moved to the trash (trash.go)
	// visibility runs cmd/visibility after the cells (visibility.go).
	visibility bool
	// scratch is a directory outside the mount, new for each run of a
	// workload and removed after it: ember's TMPDIR.
	scratch string

	goListChecked bool
	emberNoted    bool
	rep           report

	mu      sync.Mutex // protects the following
	active  map[*mount]bool
	cancel  context.CancelFunc // of the running phase
	stopped bool
}

func newRunner(c config) (*runner, error) {
	r := &runner{cfg: c, size: fullSize, active: map[*mount]bool{}}
	if c.Quick {
		r.size = quickSize
	}
	var err error
	if r.systems, err = selectSystems(c); err != nil {
		return nil, err
	}
	if r.workloads, r.visibility, err = selectWorkloads(c.Workloads, c.Quick); err != nil {
		return nil, err
	}
	for _, d := range []string{c.Work, c.Out, filepath.Join(c.Work, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	r.rep = newReport(r)
	return r, nil
}

func selectSystems(c config) ([]*system, error) {
	names := strings.Split(c.Systems, ",")
	switch c.Systems {
	case "default":
		names = nil
		if c.Quick {
			names = quickSystems
		}
		for _, s := range systems {
			if s.Default && !c.Quick {
				names = append(names, s.Name)
			}
		}
	case "all":
		names = strings.Split(systemNames(), ",")
	}
	var out []*system
	for _, n := range names {
		s, err := findSystem(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// selectWorkloads parses --workloads: names, "all", or "default" (all
// but, with --quick, the Network ones). It reports visibility apart.
func selectWorkloads(list string, quick bool) (ws []*workload, visibility bool, err error) {
	names := strings.Split(list, ",")
	switch list {
	case "all", "default":
		names = strings.Split(workloadNames(), ",")
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == visibilityName {
			visibility = true
			continue
		}
		w, err := findWorkload(n)
		if err != nil {
			return nil, false, err
		}
		if list == "default" && quick && w.Network {
			continue
		}
		ws = append(ws, w)
	}
	return ws, visibility, nil
}

// prepareInputs makes every selected workload's input before the first
// system; a workload whose input cannot be made is left out, with the
// reason in the report.
func (r *runner) prepareInputs() {
	var keep []*workload
	for _, w := range r.workloads {
		if w.Input != "" {
			if _, err := r.inputDir(w.Input); err != nil {
				r.logf("skipping workload %s: %v", w.Name, err)
				r.rep.SkippedWorkloads = append(r.rep.SkippedWorkloads, skippedWorkload{w.Name, err.Error()})
				continue
			}
		}
		keep = append(keep, w)
	}
	r.workloads = keep
	r.rep.Phases = phaseNames(keep)
}

func (r *runner) logf(format string, args ...any) { log.Printf(format, args...) }

func (r *runner) notef(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	r.logf("note: %s", n)
	r.rep.Notes = append(r.rep.Notes, n)
}

// run measures every selected cell, writing the report after each system.
func (r *runner) run() error {
	r.cleanStale()
	go r.stopOnSignal()
	defer r.stopAll()
	r.rep.LoadStart = loadAvg()
	r.prepareInputs()
	for i, s := range r.systems {
		if why := r.available(s); why != "" {
			r.logf("skipping %s: %s", s.Name, why)
			r.rep.Skipped = append(r.rep.Skipped, skipped{s.Name, why})
			continue
		}
		r.rep.Systems = append(r.rep.Systems, s.Name)
		for _, w := range r.workloads {
			r.runCell(s, w)
		}
		os.RemoveAll(filepath.Join(r.cfg.Work, "run", s.Name))
		r.emptyTrash(i < len(r.systems)-1)
		r.rep.LoadEnd = loadAvg()
		if err := r.rep.write(r); err != nil {
			return err
		}
	}
	if r.visibility {
		r.measureVisibility()
	}
	r.rep.Finished = true
	return r.rep.write(r)
}

// runCell runs workload w on system s cfg.Runs times; a failed run ends
// the cell.
func (r *runner) runCell(s *system, w *workload) {
	for i := 1; i <= r.cfg.Runs; i++ {
		if r.isStopped() {
			return
		}
		res := r.runOnce(s, w, i)
		r.rep.Results = append(r.rep.Results, res...)
		total := 0.0
		for _, x := range res {
			r.logf("%-24s %-16s run %d: %8.3fs cpu %7.2fs msgs %8d fuse %8d %s%s", s.Name, x.Phase, i,
				x.Wall, x.CPU, x.Sent, x.Kernel, x.Summary, errSuffix(x.Err))
			if x.Err != "" || x.TimedOut {
				return
			}
			total += x.Wall
		}
		if total > r.cfg.RepeatBelow.Seconds() {
			return
		}
	}
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " ERROR: " + e
}

// runOnce mounts a fresh export, runs and measures each phase, unmounts.
func (r *runner) runOnce(s *system, w *workload, run int) []result {
	base := []result{{System: s.Name, Workload: w.Name, Phase: w.Phases[0].Name, Run: run}}
	export, err := r.export(s, w, run)
	if err != nil {
		base[0].Err = err.Error()
		return base
	}
	if w.Mutates {
		defer r.discard(export)
	}
	r.scratch = filepath.Join(r.cfg.Work, "run", s.Name, fmt.Sprintf("scratch-%s-%d", w.Name, run))
	os.RemoveAll(r.scratch)
	if err := os.MkdirAll(r.scratch, 0o755); err != nil {
		base[0].Err = err.Error()
		return base
	}
	defer os.RemoveAll(r.scratch)
	m, err := r.mount(s, export, filepath.Join(r.cfg.Work, "run", s.Name, "mnt"))
	if err != nil {
		base[0].Err = err.Error()
		return base
	}
	var out []result
	for _, p := range w.Phases {
		res := r.measure(s, w, p, m, run)
		out = append(out, res)
		if res.Err != "" || res.TimedOut {
			break
		}
	}
	if err := r.unmount(m); err != nil && out[len(out)-1].Err == "" {
		out[len(out)-1].Err = "unmount: " + err.Error()
	}
	if w.Verify != nil && out[len(out)-1].Err == "" && !out[len(out)-1].TimedOut {
		last := &out[len(out)-1]
		if last.Summary, err = w.Verify(r, export); err != nil {
			last.Err = "verify: " + err.Error()
		}
	}
	return out
}

// export makes the directory system s exports for workload w: a new
// empty one per run for a mutating workload, else one copy of the input
// per system, kept until the system is done.
func (r *runner) export(s *system, w *workload, n int) (string, error) {
	dir := filepath.Join(r.cfg.Work, "run", s.Name, "export-"+w.Input)
	if w.Mutates || w.Input == "" {
		dir = filepath.Join(r.cfg.Work, "run", s.Name, fmt.Sprintf("export-%s-%d", w.Name, n))
		os.RemoveAll(dir)
		return dir, os.MkdirAll(dir, 0o755)
	}
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	src, err := r.inputDir(w.Input)
	if err != nil {
		return "", err
	}
	os.MkdirAll(dir, 0o755)
	return dir, run("cp", "-a", src, filepath.Join(dir, inputNames[w.Input]))
}

// measure times one phase with the daemon's CPU, messages and memory.
func (r *runner) measure(s *system, w *workload, p phase, m *mount, run int) result {
	res := result{System: s.Name, Workload: w.Name, Phase: p.Name, Run: run, CPU: -1, Sent: -1, Load: loadAvg()}
	pids := descendants(m.roots)
	cpu0 := cpuOf(pids)
	var st0 *upstreamStats
	if m.ctl != "" {
		var err error
		if st0, err = r.ctlStats(m); err != nil {
			res.Err = err.Error()
			return res
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	r.setCancel(cancel)
	t0 := time.Now()
	summary, err := p.Run(ctx, r, m.Dir)
	res.Wall = time.Since(t0).Seconds()
	r.setCancel(nil)
	cancel()
	res.Summary = summary
	if ctx.Err() == context.DeadlineExceeded {
		res.TimedOut, res.Summary = true, fmt.Sprintf("stopped after %v", r.cfg.Timeout)
	} else if err != nil {
		res.Err = err.Error()
	}
	if len(pids) > 0 {
		res.CPU = cpuOf(pids) - cpu0
		res.HWM = hwmOf(descendants(m.roots))
	}
	if st0 != nil {
		if st1, err := r.ctlStats(m); err == nil {
			d := st1.delta(st0)
			res.Sent, res.Ops, res.Kernel, res.KernelOps = d.Sent, d.Ops, d.Kernel, d.KernelOps
		}
	}
	return res
}

// mountAt returns the active mount whose workloads run in dir.
func (r *runner) mountAt(dir string) *mount {
	r.mu.Lock()
	defer r.mu.Unlock()
	for m := range r.active {
		if m.Dir == dir {
			return m
		}
	}
	return nil
}

func (r *runner) track(m *mount) {
	r.mu.Lock()
	r.active[m] = true
	r.mu.Unlock()
}

func (r *runner) untrack(m *mount) {
	r.mu.Lock()
	delete(r.active, m)
	r.mu.Unlock()
}

func (r *runner) setCancel(c context.CancelFunc) {
	r.mu.Lock()
	r.cancel = c
	r.mu.Unlock()
}

func (r *runner) isStopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// stopOnSignal cancels the running phase, unmounts everything and exits.
func (r *runner) stopOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	sig := <-ch
	r.logf("%v: stopping", sig)
	r.mu.Lock()
	r.stopped = true
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	r.stopAll()
	os.Exit(130)
}

// stopAll unmounts every mount and stops every daemon (sshd last).
func (r *runner) stopAll() {
	r.mu.Lock()
	var ms []*mount
	for m := range r.active {
		if m != r.sshd {
			ms = append(ms, m)
		}
	}
	r.mu.Unlock()
	for _, m := range ms {
		r.unmount(m)
	}
	if r.sshd != nil {
		r.unmount(r.sshd)
	}
}

// cleanStale lazily unmounts what an earlier, killed run left mounted
// under the work directory.
func (r *runner) cleanStale() {
	for _, p := range mountsUnder(r.cfg.Work) {
		r.logf("unmounting stale %s", p)
		exec.Command("umount", "-l", p).Run()
	}
	os.RemoveAll(filepath.Join(r.cfg.Work, "run"))
}

func (r *runner) sizeName() string {
	if r.cfg.Quick {
		return "quick"
	}
	return "full"
}

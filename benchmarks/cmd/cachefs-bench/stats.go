package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
)

// upstreamStats is the part of `cachefsd ctl --json stats` we use.
type upstreamStats struct {
	Sent      int64
	Ops       map[string]int64
	Kernel    int64            // FUSE requests
	KernelOps map[string]int64 // by opcode
}

type ctlAnswer struct {
	Stats struct {
		Upstream struct {
			Sent int64
			Ops  []struct {
				Op    string
				Count int64
			}
		}
		Kernel []kernelOp
		// Cached is the cached mode's own connection, once registered.
		Cached *struct{ Kernel []kernelOp }
	}
}

type kernelOp struct {
	Op    string
	Count int64
}

// ctlStats asks a cachefs daemon for its counters.
func (r *runner) ctlStats(m *mount) (*upstreamStats, error) {
	tool, err := r.toolPath("cachefsd")
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(tool, "ctl", "--socket", m.ctl, "--json", "stats").Output()
	if err != nil {
		return nil, fmt.Errorf("cachefsd ctl stats: %v", err)
	}
	var a ctlAnswer
	if err := json.Unmarshal(out, &a); err != nil {
		return nil, fmt.Errorf("cachefsd ctl stats: %v", err)
	}
	st := &upstreamStats{Sent: a.Stats.Upstream.Sent, Ops: map[string]int64{}}
	for _, o := range a.Stats.Upstream.Ops {
		st.Ops[o.Op] += o.Count
	}
	st.KernelOps = map[string]int64{}
	kernel := a.Stats.Kernel
	if a.Stats.Cached != nil {
		kernel = append(kernel, a.Stats.Cached.Kernel...)
	}
	for _, o := range kernel {
		st.Kernel += o.Count
		st.KernelOps[o.Op] += o.Count
	}
	return st, nil
}

// ctlRegister registers the mount's root with mode through the daemon.
func (r *runner) ctlRegister(m *mount, mode string) error {
	tool, err := r.toolPath("cachefsd")
	if err != nil {
		return err
	}
	out, err := exec.Command(tool, "ctl", "--socket", m.ctl, "register", "--mode", mode, m.mnt).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cachefsd ctl register: %v: %s", err, out)
	}
	return nil
}

// delta returns after minus before, op by op.
func (after *upstreamStats) delta(before *upstreamStats) *upstreamStats {
	d := &upstreamStats{Sent: after.Sent - before.Sent, Ops: opsDelta(after.Ops, before.Ops),
		Kernel: after.Kernel - before.Kernel, KernelOps: opsDelta(after.KernelOps, before.KernelOps)}
	return d
}

func opsDelta(after, before map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for op, n := range after {
		if n -= before[op]; n != 0 {
			d[op] = n
		}
	}
	return d
}

package benchmarks

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// quickReport is the part of results.json the test reads.
type quickReport struct {
	Finished bool
	Sizes    struct{ DDCount int }
	Systems  []string
	Phases   []string
	Skipped  []struct{ System, Reason string }
	Results  []quickResult
	// Visibility is cmd/visibility's percentiles, per link delay.
	Visibility []struct {
		LinkDelay, Phase string
		Samples          int
		P50, Max         float64
		Err              string
	}
}

type quickResult struct {
	System, Phase string
	Wall          float64
	Sent          int64
	Ops           map[string]int64
	Kernel        int64
	KernelOps     map[string]int64
	Summary       string
	TimedOut      bool
	Err           string
}

// TestQuick builds the daemons and runs the suite with --quick, then
// checks that every cell was measured and that cachefs's counters make
// sense: messages reach the host, and in consistent mode each 1 KiB
// write of dd is one upstream write.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("the quick suite takes about 2 minutes")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("the suite mounts with the mount syscall and needs root")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	for pkg, name := range map[string]string{"../cmd/cachefsd": "cachefsd", "./loopback": "loopback",
		"./cmd/visibility": "visibility", "./cmd/cachefs-bench": "cachefs-bench"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	out := filepath.Join(tmp, "out")
	rep := runQuick(t, bin, filepath.Join(tmp, "work"), out)
	checkCells(t, rep)
	checkCachefs(t, rep)
	checkVisibility(t, rep)
	checkFiles(t, rep, out)
}

// runQuick runs cachefs-bench --quick with its default workloads, which
// need no network, leaving fio out if it is missing.
func runQuick(t *testing.T, bin, work, out string) *quickReport {
	workloads := "default"
	if _, err := exec.LookPath("fio"); err != nil {
		t.Logf("fio not installed: leaving the fio workload out")
		workloads = "dd,stat,golist,untar,grep,ls,visibility"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "cachefs-bench"), "--quick", "--work", work,
		"--bin", bin, "--out", out, "--workloads", workloads)
	cmd.WaitDelay = 30 * time.Second
	log, err := cmd.CombinedOutput()
	t.Logf("cachefs-bench --quick:\n%s", log)
	if err != nil {
		t.Fatalf("cachefs-bench --quick: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatalf("results: %v", err)
	}
	var rep quickReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	return &rep
}

func find(rep *quickReport, sys, phase string) []quickResult {
	var out []quickResult
	for _, r := range rep.Results {
		if r.System == sys && r.Phase == phase {
			out = append(out, r)
		}
	}
	return out
}

// checkCells wants every system measured on every phase, without error,
// timeout, or a summary that differs from native's.
func checkCells(t *testing.T, rep *quickReport) {
	if !rep.Finished {
		t.Errorf("report not finished")
	}
	for _, s := range rep.Skipped {
		t.Errorf("system %s skipped: %s", s.System, s.Reason)
	}
	if len(rep.Systems) != 6 || len(rep.Phases) < 10 {
		t.Errorf("got %d systems and %d phases, want 6 and at least 10", len(rep.Systems), len(rep.Phases))
	}
	for _, ph := range rep.Phases {
		want := ""
		for _, sys := range rep.Systems {
			rs := find(rep, sys, ph)
			if len(rs) != 1 {
				t.Errorf("%s on %s: got %d results, want 1", ph, sys, len(rs))
				continue
			}
			r := rs[0]
			switch {
			case r.Err != "" || r.TimedOut:
				t.Errorf("%s on %s: error %q, timed out %v", ph, sys, r.Err, r.TimedOut)
			case r.Wall <= 0:
				t.Errorf("%s on %s: wall time %v", ph, sys, r.Wall)
			case want == "":
				want = r.Summary
			case r.Summary != want:
				t.Errorf("%s on %s saw %q, %s saw %q", ph, sys, r.Summary, rep.Systems[0], want)
			}
		}
	}
}

// checkCachefs checks the upstream counters: none outside cachefs; in
// consistent mode every phase reaches the host and dd's writes are one
// message each, as they are one FUSE WRITE each; every cachefs system
// sends messages and counts the kernel's requests.
func checkCachefs(t *testing.T, rep *quickReport) {
	for _, sys := range rep.Systems {
		cachefs := strings.HasPrefix(sys, "cachefs-")
		consistent := strings.HasPrefix(sys, "cachefs-consistent-")
		var total, kernel int64
		for _, ph := range rep.Phases {
			for _, r := range find(rep, sys, ph) {
				switch {
				case !cachefs && r.Sent != -1:
					t.Errorf("%s on %s: upstream messages %d, want -1 (not cachefs)", ph, sys, r.Sent)
				case consistent && r.Sent <= 0:
					t.Errorf("%s on %s: %d upstream messages, want > 0", ph, sys, r.Sent)
				}
				total += r.Sent
				kernel += r.Kernel
			}
		}
		if cachefs && total <= 0 {
			t.Errorf("%s: %d upstream messages in all, want > 0", sys, total)
		}
		if cachefs && kernel <= 0 {
			t.Errorf("%s: %d FUSE requests counted in all, want > 0", sys, kernel)
		}
		if consistent {
			for _, r := range find(rep, sys, "dd 1 KiB writes") {
				if got, want := r.Ops["write"], int64(rep.Sizes.DDCount); got != want {
					t.Errorf("%s: dd of %d x 1 KiB sent %d upstream writes, want %d", sys, want, got, want)
				}
				if got, want := r.KernelOps["WRITE"], int64(rep.Sizes.DDCount); got != want {
					t.Errorf("%s: dd of %d x 1 KiB made %d FUSE writes, want %d", sys, want, got, want)
				}
			}
		}
	}
}

// checkVisibility wants both phases measured at link delays 0 and 50us,
// the delays of the quick systems.
func checkVisibility(t *testing.T, rep *quickReport) {
	for _, delay := range []string{"0", "50us"} {
		for _, phase := range []string{"idle", "under untar"} {
			n := 0
			for _, v := range rep.Visibility {
				if v.LinkDelay != delay || (v.Phase != phase && v.Err == "") {
					continue
				}
				n++
				if v.Err != "" || v.Samples <= 0 || v.P50 <= 0 || v.Max < v.P50 {
					t.Errorf("visibility at %s, %s: %+v", delay, phase, v)
				}
			}
			if n != 1 {
				t.Errorf("visibility at %s, %s: got %d results, want 1", delay, phase, n)
			}
		}
	}
}

// checkFiles wants a CSV row per cell, every system in the markdown and
// an SVG chart.
func checkFiles(t *testing.T, rep *quickReport, out string) {
	f, err := os.Open(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatalf("results.csv: %v", err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("results.csv: %v", err)
	}
	if got, want := len(rows), 1+len(rep.Systems)*len(rep.Phases); got != want {
		t.Errorf("results.csv: got %d rows, want %d", got, want)
	}
	md, _ := os.ReadFile(filepath.Join(out, "results.md"))
	for _, s := range rep.Systems {
		if !strings.Contains(string(md), "| "+s+" |") {
			t.Errorf("results.md has no row for %s", s)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(out, "chart.svg"))
	if !strings.HasPrefix(string(svg), "<svg") || !strings.Contains(string(svg), "<rect x=") {
		t.Errorf("chart.svg is no bar chart: %.100q", svg)
	}
}

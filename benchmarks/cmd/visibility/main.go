// Command visibility measures how long a host-side change takes to be
// visible to a reader in a cached subtree of a cachefs mount: idle, and
// while the host untars a tree into the same subtree. It runs the host
// server and the guest mount in one process (internal/inproc) with the
// given link delay, and prints percentiles and the guest's own event
// latency figures (cachefsd ctl stats reports the same); with -json, one
// JSON object instead (cachefs-bench runs it so).
//
//	go run ./benchmarks/cmd/visibility -samples 300 -tar /path/to/linux.tar
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/inproc"
)

// giveUp ends the wait for one change: it counts as lost and as giveUp.
const giveUp = 10 * time.Second

// output is what -json prints; durations are in seconds.
type output struct {
	LinkDelay string
	Samples   int
	Tar       string // what the loaded phase extracts
	Phases    []phaseResult
	Events    eventResult
}

type phaseResult struct {
	Name               string // "idle", "under untar"
	Samples            int
	Lost               int // changes not seen within giveUp
	P50, P90, P99, Max float64
}

// eventResult is the guest's EventStats after both phases.
type eventResult struct {
	Batches, Events, Overflows uint64
	P50, P90, P99, Max         float64
}

func main() {
	samples := flag.Int("samples", 200, "changes measured per phase")
	delay := flag.Duration("link-delay", 50*time.Microsecond, "one-way link delay")
	tarball := flag.String("tar", "", "tar file the host extracts during the loaded phase (empty: a generated tree)")
	work := flag.String("work", "/var/tmp/cachefs-visibility", "work directory")
	asJSON := flag.Bool("json", false, "print one JSON object instead of text")
	flag.Parse()
	out, err := run(*samples, *delay, *tarball, *work)
	if err != nil {
		log.Fatal(err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Println(string(b))
		return
	}
	printText(out)
}

func run(samples int, delay time.Duration, tarball, work string) (*output, error) {
	os.RemoveAll(work)
	export, mnt := filepath.Join(work, "export"), filepath.Join(work, "mnt")
	for _, d := range []string{filepath.Join(export, "w"), mnt, filepath.Join(work, "state")} {
		if err := os.MkdirAll(d, 0755); err != nil {
			return nil, err
		}
	}
	env, err := inproc.Launch(inproc.Options{Export: export, Mountpoint: mnt, LinkDelay: delay,
		Policy: consistency.NewPolicy(consistency.Consistent), CacheTTL: time.Hour,
		StateDir: filepath.Join(work, "state"), Logf: func(string, ...any) {}})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	env.FS.Register("w", consistency.Cached)
	host, guest := filepath.Join(export, "w", "probe"), filepath.Join(mnt, "w", "probe")
	os.WriteFile(host, []byte("0"), 0644)
	out := &output{LinkDelay: delay.String(), Samples: samples, Tar: tarball}
	out.Phases = append(out.Phases, summarize("idle", measure(host, guest, samples)))
	untar, err := startUntar(tarball, filepath.Join(export, "w", "untar"), work)
	if err != nil {
		return nil, err
	}
	if tarball == "" {
		out.Tar = "a generated tree of 20,000 files of 2 KiB"
	}
	out.Phases = append(out.Phases, summarize("under untar", measure(host, guest, samples)))
	syscall.Kill(-untar.Process.Pid, syscall.SIGKILL)
	untar.Wait()
	st := env.FS.Stats().Events
	out.Events = eventResult{Batches: st.Batches, Events: st.Events, Overflows: st.Overflows,
		P50: st.P50.Seconds(), P90: st.P90.Seconds(), P99: st.P99.Seconds(), Max: st.P100.Seconds()}
	return out, nil
}

// measure changes the host file and polls the guest until it reads the
// new content, samples times.
func measure(host, guest string, samples int) []time.Duration {
	os.ReadFile(guest) // cached from now on
	var out []time.Duration
	for i := 1; i <= samples; i++ {
		want := []byte(strconv.Itoa(i))
		start := time.Now()
		os.WriteFile(host, want, 0644)
		for {
			if b, _ := os.ReadFile(guest); bytes.Equal(b, want) {
				break
			}
			if time.Since(start) > giveUp {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		out = append(out, time.Since(start))
		time.Sleep(5 * time.Millisecond)
	}
	return out
}

func summarize(phase string, d []time.Duration) phaseResult {
	slices.Sort(d)
	p := func(q int) float64 { return d[min(len(d)-1, len(d)*q/100)].Seconds() }
	lost := 0
	for _, x := range d {
		if x > giveUp {
			lost++
		}
	}
	return phaseResult{Name: phase, Samples: len(d), Lost: lost, P50: p(50), P90: p(90), P99: p(99),
		Max: d[len(d)-1].Seconds()}
}

func printText(o *output) {
	fmt.Printf("link delay %s, %d samples per phase\n", o.LinkDelay, o.Samples)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	for _, p := range o.Phases {
		fmt.Printf("%-12s visibility p50 %v  p90 %v  p99 %v  max %v  lost %d\n", p.Name,
			sec(p.P50), sec(p.P90), sec(p.P99), sec(p.Max), p.Lost)
	}
	e := o.Events
	fmt.Printf("guest event stats: %d batches, %d events, %d overflows; latency p50 %v p90 %v p99 %v max %v\n",
		e.Batches, e.Events, e.Overflows, sec(e.P50), sec(e.P90), sec(e.P99), sec(e.Max))
}

// startUntar extracts tarball (or a generated tree's tarball) into dir on
// the host side, in the background, again and again, in a process group
// of its own that the caller kills; the loop dies with this process.
func startUntar(tarball, dir, work string) (*exec.Cmd, error) {
	if tarball == "" {
		tarball = filepath.Join(work, "gen.tar")
		src := filepath.Join(work, "gen")
		for i := 0; i < 20000; i++ {
			d := filepath.Join(src, fmt.Sprintf("d%03d", i%200))
			os.MkdirAll(d, 0755)
			os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.c", i)), bytes.Repeat([]byte("x"), 2048), 0644)
		}
		if out, err := exec.Command("tar", "-C", src, "-cf", tarball, ".").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("tar: %v: %s", err, out)
		}
	}
	os.MkdirAll(dir, 0755)
	cmd := exec.Command("sh", "-c", "while :; do tar -C "+dir+" -xf "+tarball+"; done")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	waitBusy(dir)
	return cmd, nil
}

// waitBusy waits (at most 10 s) until the untar has made its first
// entries and one second more, so that the loaded phase is loaded.
func waitBusy(dir string) {
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			break
		}
	}
	time.Sleep(time.Second)
}

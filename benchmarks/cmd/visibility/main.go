// Command visibility measures how long a host-side change takes to be
// visible to a reader in a cached subtree of a cachefs mount: idle, and
// while the host untars a tree into the same subtree. It runs the host
// server and the guest mount in one process (internal/harness) with the
// given link delay, and prints percentiles and the guest's own event
// latency figures (cachefsd ctl stats reports the same).
//
//	go run ./benchmarks/cmd/visibility -samples 300 -tar /path/to/linux.tar
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
)

func main() {
	samples := flag.Int("samples", 200, "changes measured per phase")
	delay := flag.Duration("link-delay", 50*time.Microsecond, "one-way link delay")
	tarball := flag.String("tar", "", "tar file the host extracts during the loaded phase (empty: a generated tree)")
	work := flag.String("work", "/var/tmp/cachefs-visibility", "work directory")
	flag.Parse()
	if err := run(*samples, *delay, *tarball, *work); err != nil {
		log.Fatal(err)
	}
}

func run(samples int, delay time.Duration, tarball, work string) error {
	os.RemoveAll(work)
	export, mnt := filepath.Join(work, "export"), filepath.Join(work, "mnt")
	for _, d := range []string{filepath.Join(export, "w"), mnt, filepath.Join(work, "state")} {
		if err := os.MkdirAll(d, 0755); err != nil {
			return err
		}
	}
	env, err := harness.Launch(harness.Options{Export: export, Mountpoint: mnt, LinkDelay: delay,
		Policy: consistency.NewPolicy(consistency.Consistent), CacheTTL: time.Hour,
		StateDir: filepath.Join(work, "state"), Logf: func(string, ...any) {}})
	if err != nil {
		return err
	}
	defer env.Close()
	env.FS.Register("w", consistency.Cached)
	host, guest := filepath.Join(export, "w", "probe"), filepath.Join(mnt, "w", "probe")
	os.WriteFile(host, []byte("0"), 0644)
	fmt.Printf("link delay %v, %d samples per phase\n", delay, samples)
	report("idle", measure(host, guest, samples))
	untar, err := startUntar(tarball, filepath.Join(export, "w", "untar"), work)
	if err != nil {
		return err
	}
	report("under untar", measure(host, guest, samples))
	untar.Process.Kill()
	untar.Wait()
	st := env.FS.Stats().Events
	fmt.Printf("guest event stats: %d batches, %d events, %d overflows; latency p50 %v p90 %v p99 %v max %v\n",
		st.Batches, st.Events, st.Overflows, st.P50, st.P90, st.P99, st.P100)
	return nil
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
			if time.Since(start) > 10*time.Second {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		out = append(out, time.Since(start))
		time.Sleep(5 * time.Millisecond)
	}
	return out
}

func report(phase string, d []time.Duration) {
	slices.Sort(d)
	p := func(q int) time.Duration { return d[min(len(d)-1, len(d)*q/100)] }
	fmt.Printf("%-12s visibility p50 %v  p90 %v  p99 %v  max %v\n", phase, p(50), p(90), p(99), d[len(d)-1])
}

// startUntar extracts tarball (or a generated tree's tarball) into dir on
// the host side, in the background.
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
	return cmd, cmd.Start()
}

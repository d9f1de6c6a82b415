package cachefs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"golang.org/x/sys/unix"
)

// TestExerciser is a data-integrity exerciser: in each mode, over each
// transport, exWorkers goroutines at once each drive a file of their own
// through random writes, writes past EOF, truncates up and down,
// fallocate (plain, keeping the size, punching holes, zeroing ranges),
// mmap reads and writes with msync, O_DIRECT reads and writes, renames
// of the open file (also into other directories) and reopens, checking
// the file byte for byte against a model after every step. At the end
// the host's copy (after write-back) must equal the model too.
//
// CACHEFS_EXERCISER_OPS sets the operations per worker (default 100),
// CACHEFS_EXERCISER_SEED the seed (default: the time); a failure prints
// the seed and the worker's last operations. CACHEFS_EXERCISER_SKIP
// names operations to leave out (comma-separated), to look past a known
// failure.
func TestExerciser(t *testing.T) {
	seed, ops := exerciserSeed(t), envInt(t, "CACHEFS_EXERCISER_OPS", 100)
	exSkip(t, os.Getenv("CACHEFS_EXERCISER_SKIP"))
	for _, tr := range []string{"fuse", "uring"} {
		t.Run(tr, func(t *testing.T) {
			if tr == "uring" {
				requireURingTests(t)
			}
			for _, m := range []string{"consistent", "cached", "delegated", "overlay"} {
				t.Run(m, func(t *testing.T) {
					env, sub := startExerciser(t, tr == "uring", m)
					runExerciser(t, env, sub, seed, ops)
				})
			}
		})
	}
}

const exWorkers = 3

// exSkip leaves the named operations out of exOps for the test.
func exSkip(t *testing.T, names string) {
	if names == "" {
		return
	}
	old := exOps
	t.Cleanup(func() { exOps = old })
	var keep []exOp
	for _, op := range old {
		if !slices.Contains(strings.Split(names, ","), op.name) {
			keep = append(keep, op)
		}
	}
	exOps = keep
}

// exerciserSeed returns CACHEFS_EXERCISER_SEED or a fresh seed, which a
// failing test prints.
func exerciserSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CACHEFS_EXERCISER_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CACHEFS_EXERCISER_SEED: %v", err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("exerciser seed %d: replay with CACHEFS_EXERCISER_SEED=%d -run '%s'", seed, seed, t.Name())
		}
	})
	return seed
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// startExerciser mounts for mode m ("overlay": a delegated subtree
// served by an overlay) and returns the subtree the workers use,
// relative to the mount and the export.
func startExerciser(t *testing.T, uring bool, m string) (*harness.Env, string) {
	export := t.TempDir()
	o := harness.Options{Export: export, URing: uring}
	if m == "overlay" {
		if uring || os.Geteuid() != 0 {
			t.Skip("overlay: only over /dev/fuse, as root")
		}
		o.FS = cachefs.Options{Overlays: true}
	}
	if err := os.Mkdir(filepath.Join(export, "x"), 0o777); err != nil {
		t.Fatal(err)
	}
	env := harness.Start(t, o)
	mode := map[string]consistency.Mode{"consistent": consistency.Consistent, "cached": consistency.Cached,
		"delegated": consistency.Delegated, "overlay": consistency.Delegated}[m]
	if m == "overlay" {
		env.FS.Register("x", mode)
	} else {
		env.FS.Register("", mode)
	}
	var st unix.Stat_t
	if err := unix.Stat(env.Mountpoint, &st); err != nil {
		t.Fatalf("Stat mountpoint: %v", err)
	}
	watchdog(t, st.Dev)
	return env, "x"
}

// runExerciser runs the workers under sub, then checks the host's copy
// of each file after a write-back.
func runExerciser(t *testing.T, env *harness.Env, sub string, seed uint64, ops int) {
	workers := make([]*exWorker, exWorkers)
	var wg sync.WaitGroup
	for i := range workers {
		w, err := newExWorker(seed, i, filepath.Join(env.Mountpoint, sub, fmt.Sprintf("w%d", i)))
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.run(ops); err != nil {
				t.Errorf("worker %d: %v\nlast operations:\n%s", i, err, w.lastOps(15))
			}
		}()
	}
	child := startExChild(t, filepath.Join(env.Mountpoint, sub, fmt.Sprintf("w%d", exWorkers)), seed, ops)
	wg.Wait()
	if w := child.wait(t); w != nil {
		workers = append(workers, w)
	}
	skipped := map[string]int{}
	for i, w := range workers {
		for k, v := range w.skipped {
			skipped[k] += v
		}
		if w.f == nil {
			continue // the child process's, closed there
		}
		if err := w.f.Close(); err != nil {
			t.Errorf("worker %d: close: %v", i, err)
		}
	}
	if len(skipped) > 0 {
		t.Logf("refused as unsupported: %v", skipped)
	}
	if t.Failed() {
		return
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Errorf("write-back: %+v", failed)
	}
	for i, w := range workers {
		host := filepath.Join(env.Export, sub, fmt.Sprintf("w%d", i), w.rel)
		f, err := os.Open(host)
		if err != nil {
			t.Errorf("worker %d: host copy: %v", i, err)
			continue
		}
		if err := sameContents(f, w.model); err != nil {
			t.Errorf("worker %d: host copy of %s: %v\nlast operations:\n%s", i, w.rel, err, w.lastOps(15))
		}
		f.Close()
	}
}

// run does ops random operations, checking the file after each.
func (w *exWorker) run(ops int) error {
	if err := w.check(); err != nil {
		return fmt.Errorf("after create: %v", err)
	}
	for i := 0; i < ops; i++ {
		op := exOps[w.rng.IntN(len(exOps))]
		if err := op.do(w); err != nil {
			return fmt.Errorf("step %d, %s: %v", i, op.name, err)
		}
		if err := w.check(); err != nil {
			return fmt.Errorf("step %d, after %s: %v", i, op.name, err)
		}
	}
	return nil
}

func (w *exWorker) lastOps(n int) string {
	from := max(0, len(w.log)-n)
	return "  " + strings.Join(w.log[from:], "\n  ")
}

// A worker in a process of its own (this test binary, running
// TestExerciserChild), alongside the goroutines: it reports the file's
// path and its model through files, for the host check.

const exChildEnv = "CACHEFS_EXERCISER_CHILD"

type exChild struct {
	cmd *exec.Cmd
	out string
	log *strings.Builder
}

func startExChild(t *testing.T, dir string, seed uint64, ops int) *exChild {
	c := &exChild{out: filepath.Join(t.TempDir(), "child"), log: &strings.Builder{}}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestExerciserChild$", "-test.count=1", "-test.v")
	c.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%d|%d|%s", exChildEnv, dir, seed, exWorkers, ops, c.out))
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start the child worker: %v", err)
	}
	return c
}

// wait returns the child's worker, with its file's path and model, or
// nil (failing the test) if it failed.
func (c *exChild) wait(t *testing.T) *exWorker {
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("child worker (process): %v\n%s", err, c.log.String())
		return nil
	}
	rel, err1 := os.ReadFile(c.out + ".path")
	model, err2 := os.ReadFile(c.out + ".model")
	if err1 != nil || err2 != nil {
		t.Errorf("child worker's results: %v %v\n%s", err1, err2, c.log.String())
		return nil
	}
	return &exWorker{rel: string(rel), model: model, skipped: map[string]int{}}
}

// TestExerciserChild is TestExerciser's worker process; alone it skips.
func TestExerciserChild(t *testing.T) {
	v := os.Getenv(exChildEnv)
	if v == "" {
		t.Skip("the worker process of TestExerciser")
	}
	var dir, out string
	var seed uint64
	var id, ops int
	f := strings.Split(v, "|")
	if len(f) != 5 {
		t.Fatalf("%s=%q", exChildEnv, v)
	}
	exSkip(t, os.Getenv("CACHEFS_EXERCISER_SKIP"))
	dir, out = f[0], f[4]
	fmt.Sscan(f[1], &seed)
	fmt.Sscan(f[2], &id)
	fmt.Sscan(f[3], &ops)
	w, err := newExWorker(seed, id, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.run(ops); err != nil {
		t.Fatalf("worker %d (process): %v\nlast operations:\n%s", id, err, w.lastOps(15))
	}
	if err := w.f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	os.WriteFile(out+".model", w.model, 0o600)
	os.WriteFile(out+".path", []byte(w.rel), 0o600)
}

package fuseuring

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hangBound bounds each wait of these tests: a request that is held up
// waits for good, so a wait that ends here failed.
const hangBound = 20 * time.Second

// TestHandOff: LOOKUPs that the daemon holds do not hold up the requests
// behind them from the same CPU. Each is handed off and the queue goes
// on, with a new entry for each, beyond Depth; once let go, they are
// answered, and the queue still serves.
func TestHandOff(t *testing.T) {
	d := startRingDaemon(t)
	cpu, other := twoCPUs(t)
	const k = 2 * testDepth // the queue needs entries beyond Depth
	looked := make(chan error, k)
	for i := range k {
		go func() {
			looked <- onCPU(cpu, func() error {
				_, err := os.Lstat(filepath.Join(d.mnt, fmt.Sprintf("block%d", i)))
				if !errors.Is(err, syscall.ENOENT) {
					return fmt.Errorf("LOOKUP let go: %v, want ENOENT", err)
				}
				return nil
			})
		}()
		// One at a time: requests that find no free entry wait in the
		// kernel until one of the queue's requests is answered.
		d.waitXattr(t, other, "user.blocked", uint64(i+1))
	}
	within(t, "1000 GETXATTRs from the CPU of the waiting LOOKUPs", func() error {
		return onCPU(cpu, func() error { return probe(d.mnt, 1000) })
	})
	if n := d.xattr(t, other, "user.handoffs"); n < k {
		t.Errorf("%d handoffs, want at least one per waiting LOOKUP (%d)", n, k)
	}
	d.release(t, other)
	for range k {
		within(t, "a LOOKUP let go", func() error { return <-looked })
	}
	within(t, "1000 GETXATTRs after", func() error {
		return onCPU(cpu, func() error { return probe(d.mnt, 1000) })
	})
}

// probe makes n GETXATTRs of a name the daemon answers ENODATA for.
func probe(mnt string, n int) error {
	buf := make([]byte, 64)
	for range n {
		if _, err := unix.Getxattr(mnt, "user.none", buf); !errors.Is(err, unix.ENODATA) {
			return fmt.Errorf("getxattr user.none: %v, want ENODATA", err)
		}
	}
	return nil
}

// onCPU runs f on a thread of its own pinned to cpu; the thread ends
// with it.
func onCPU(cpu int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the pinned thread exits
		if err := pin(cpu); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

// within runs f and returns its error, failing the test if f has not
// returned within hangBound.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- f() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		return err
	case <-time.After(hangBound):
		t.Fatalf("%s: still waiting after %v", what, hangBound)
		return nil
	}
}

// twoCPUs returns two CPUs the test may run on (the same one twice if
// it has one).
func twoCPUs(t *testing.T) (int, int) {
	var cpus []int
	for cpu := range allowedCPUs() {
		cpus = append(cpus, cpu)
	}
	if len(cpus) == 0 {
		t.Skip("no CPU set")
	}
	slices.Sort(cpus)
	return cpus[0], cpus[len(cpus)-1]
}

// ringDaemon is a daemon process serving a slowFS over the rings.
type ringDaemon struct {
	mnt  string
	cmd  *exec.Cmd
	out  string // the file of its output
	done chan struct{}
}

// startRingDaemon mounts a slowFS over the rings in a process of its
// own and waits until it is mounted. Cleanup lets its LOOKUPs go, stops
// it (killing it after hangBound, which aborts what it holds) and
// detaches the mount.
func startRingDaemon(t *testing.T) *ringDaemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if err := Supported(); err != nil {
		t.Skipf("FUSE over io_uring: %v", err)
	}
	d := &ringDaemon{mnt: t.TempDir(), out: filepath.Join(t.TempDir(), "out"), done: make(chan struct{})}
	out, err := os.Create(d.out)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	d.cmd = exec.Command(os.Args[0], "-test.run=^$")
	d.cmd.Env = append(os.Environ(), daemonEnv+"="+d.mnt)
	d.cmd.Stdout, d.cmd.Stderr = out, out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.stop(t) })
	deadline := time.Now().Add(hangBound)
	for !mounted(d.mnt) {
		select {
		case <-d.done:
			t.Fatalf("the daemon exited: %s", d.output())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not mounted after %v", hangBound)
		}
	}
	return d
}

func (d *ringDaemon) stop(t *testing.T) {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(hangBound):
		t.Errorf("the daemon still runs %v after SIGTERM; killing it", hangBound)
		d.cmd.Process.Kill()
		<-d.done
	}
	unix.Unmount(d.mnt, unix.MNT_DETACH)
	if !d.cmd.ProcessState.Success() {
		t.Errorf("daemon: %v", d.cmd.ProcessState)
	}
	if t.Failed() {
		t.Logf("daemon output:\n%s", d.output())
	}
}

// xattr reads the root's attribute name, a number, from a thread on cpu.
func (d *ringDaemon) xattr(t *testing.T, cpu int, name string) uint64 {
	t.Helper()
	var n uint64
	within(t, "getxattr "+name, func() error {
		return onCPU(cpu, func() error {
			buf := make([]byte, 32)
			sz, err := unix.Getxattr(d.mnt, name, buf)
			if err != nil {
				return err
			}
			n, err = strconv.ParseUint(string(buf[:sz]), 10, 64)
			return err
		})
	})
	return n
}

// waitXattr waits until the root's attribute name reaches want.
func (d *ringDaemon) waitXattr(t *testing.T, cpu int, name string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(hangBound)
	for n := d.xattr(t, cpu, name); n < want; n = d.xattr(t, cpu, name) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %d after %v, want %d", name, n, hangBound, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// release lets the daemon's waiting LOOKUPs go.
func (d *ringDaemon) release(t *testing.T, cpu int) {
	t.Helper()
	within(t, "getxattr user.release", func() error {
		return onCPU(cpu, func() error {
			_, err := unix.Getxattr(d.mnt, "user.release", make([]byte, 32))
			return err
		})
	})
}

func (d *ringDaemon) output() string {
	b, _ := os.ReadFile(d.out)
	return string(b)
}

func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return bytes.Contains(b, []byte(" "+dir+" "))
}

//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/internal/harness"
	"golang.org/x/sys/unix"
)

// TestURingHostStopped: over io_uring, a request that waits for a
// stopped host (an fsync in a delegated subtree) does not hold up a
// stat the guest answers from its caches, nor a read of data the guest
// holds, made from the same CPU afterwards: both reach the daemon (the
// kernel's GETATTR and READ counts rise) and are answered while the
// fsync still waits. Before the rings handed a waiting request off, the
// stat waited behind the fsync until the host came back.
func TestURingHostStopped(t *testing.T) {
	requireFUSE(t)
	harness.EnableURing(t)
	p := newPaths(t)
	held := pattern(1, 20000)
	if err := os.WriteFile(filepath.Join(p.export, "held"), held, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, p.export, p.sock, false)
	startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", "unix://"+p.sock,
		"--default-mode", "delegated", "--overlay=false", "--state-dir", t.TempDir(), "--uring", "on")
	if !ctlStats(t, p.ctl).URing {
		t.Fatal("the mount is not served over io_uring")
	}
	// A create makes the root's listing the guest's; the host is asked
	// nothing about its names or attributes after that.
	if err := os.WriteFile(filepath.Join(p.mnt, "first"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w := openGuestCopy(t, filepath.Join(p.mnt, "held"))

	cpu := firstCPU(t)
	srv.cmd.Process.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { srv.cmd.Process.Signal(syscall.SIGCONT) })
	// Made with the host stopped, its attributes are the guest's until
	// written back (a node the host has waits for the write-back queue
	// before anything asks the host for it).
	made := filepath.Join(p.mnt, "made")
	if err := os.WriteFile(made, []byte("made in the guest"), 0o644); err != nil {
		t.Fatal(err)
	}
	pending := ctlStats(t, p.ctl).Writeback.Pending
	fsynced := make(chan error, 1)
	go func() { fsynced <- onCPU(cpu, func() error { return writeSynced(p.mnt, "fsync-waits", 2) }) }()
	waitFor(t, 10*time.Second, "the fsync to wait for the host", func() bool {
		return ctlStats(t, p.ctl).Writeback.Pending >= pending+2
	})

	before := ctlStats(t, p.ctl)
	err := within(t, "a stat and a read from the CPU of the waiting fsync", func() error {
		return onCPU(cpu, func() error { return statAndRead(made, w, held) })
	})
	if err != nil {
		t.Fatal(err)
	}
	after := ctlStats(t, p.ctl)
	if n := after.kernelCount("GETATTR") + after.kernelCount("STATX") - before.kernelCount("GETATTR") - before.kernelCount("STATX"); n < 1 {
		t.Errorf("the stat sent the daemon %d GETATTRs, want it to reach the daemon", n)
	}
	if n := after.kernelCount("READ") - before.kernelCount("READ"); n < 1 {
		t.Errorf("the read sent the daemon %d READs, want it to reach the daemon", n)
	}
	if len(fsynced) > 0 {
		t.Fatalf("fsync returned with the host stopped: %v", <-fsynced)
	}
	srv.cmd.Process.Signal(syscall.SIGCONT)
	if err := within(t, "the fsync once the host is back", func() error { return <-fsynced }); err != nil {
		t.Errorf("fsync: %v", err)
	}
}

// openGuestCopy opens path for writing while a reader holds it open, so
// that the guest copies it from the host and serves its reads from that
// copy itself (the kernel takes no passthrough open beside another).
func openGuestCopy(t *testing.T, path string) *os.File {
	t.Helper()
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// statAndRead stats path with the attributes asked of the daemon, and
// reads f, whose contents are want, past the page cache.
func statAndRead(path string, f *os.File, want []byte) error {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, &st); err != nil {
		return fmt.Errorf("statx: %w", err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("fadvise: %w", err)
	}
	got := make([]byte, len(want))
	if n, err := f.ReadAt(got, 0); n != len(want) || !bytes.Equal(got, want) {
		return fmt.Errorf("read %d bytes (%v), want the %d the host had", n, err, len(want))
	}
	return nil
}

// onCPU runs f on a thread of its own pinned to cpu, which ends with it
// (its goroutine exits locked to it).
func onCPU(cpu int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

// firstCPU returns the first CPU the test may run on.
func firstCPU(t *testing.T) int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	for cpu := 0; cpu < len(set)*64; cpu++ {
		if set.IsSet(cpu) {
			return cpu
		}
	}
	t.Fatal("no CPU in the affinity mask")
	return 0
}

//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHostTimeout: with --host-timeout 1s and the host away, killed or
// stopped with its connection up (then it answers no ping either), a
// stat of a path the guest does not have fails with a link error well
// before the default 30s, and the mount stays up.
func TestHostTimeout(t *testing.T) {
	for _, how := range []string{"killed", "stopped"} {
		t.Run(how, func(t *testing.T) {
			p := newPaths(t)
			srv := startServe(t, p.export, p.sock, false)
			guest := startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", "unix://"+p.sock, "--host-timeout", "1s")
			defer hostAway(t, srv, p.sock, how)()
			errc := make(chan error, 1)
			go func() {
				_, err := os.Stat(filepath.Join(p.mnt, "missing"))
				errc <- err
			}()
			select {
			case err := <-errc:
				checkLinkError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatalf("stat with the host %s and --host-timeout 1s still blocked after 20s", how)
			}
			if guest.exited() {
				t.Errorf("the mount daemon exited with the server %s:\n%s", how, guest.out.String())
			}
		})
	}
}

// TestKillEndsHostWait: with --host-timeout hard, a stat of an uncached
// path blocks while the host is away (killed, or stopped with SIGSTOP
// so that its connection stays up); SIGKILL ends the stat within a few
// seconds, and once the host is back the mount answers again.
func TestKillEndsHostWait(t *testing.T) {
	for _, how := range []string{"killed", "stopped"} {
		t.Run(how, func(t *testing.T) { testKillEndsHostWait(t, how, false) })
	}
	// Writes of 1 MiB to a file opened before: the stopped host's socket
	// fills, and the daemon's send of a WRITE blocks.
	t.Run("stopped/write", func(t *testing.T) { testKillEndsHostWait(t, "stopped", true) })
}

func testKillEndsHostWait(t *testing.T, how string, write bool) {
	p := newPaths(t)
	if err := os.WriteFile(filepath.Join(p.export, "f"), []byte("x"), 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	srv := startServe(t, p.export, p.sock, false)
	startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", "unix://"+p.sock, "--host-timeout", "hard")
	stat := exec.Command("stat", filepath.Join(p.mnt, "f"))
	if write {
		f, err := os.OpenFile(filepath.Join(p.mnt, "f"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatalf("OpenFile: %v", err)
		}
		defer f.Close()
		stat = exec.Command("dd", "if=/dev/zero", "bs=1M", "count=64")
		stat.Stdout = f
	}
	back := hostAway(t, srv, p.sock, how)
	defer back()

	if err := stat.Start(); err != nil {
		t.Fatalf("start stat: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- stat.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("stat with the host away and --host-timeout hard ended: %v", err)
	case <-time.After(time.Second):
	}
	stat.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Errorf("stat still blocked 5s after SIGKILL")
		back()
		<-done
	}
	back()
	if _, err := os.Stat(filepath.Join(p.mnt, "f")); err != nil {
		t.Errorf("Stat once the host is back: %v", err)
	}
}

// hostAway takes the host server away as how says and returns the
// function that brings it back, once.
func hostAway(t *testing.T, srv *daemon, sock, how string) (back func()) {
	t.Helper()
	done := false
	if how == "stopped" {
		srv.cmd.Process.Signal(syscall.SIGSTOP)
		t.Cleanup(func() { srv.cmd.Process.Signal(syscall.SIGCONT) })
		waitFor(t, 10*time.Second, "the server to stop", func() bool { return stopped(srv.pid()) })
		return func() {
			if !done {
				done = true
				srv.cmd.Process.Signal(syscall.SIGCONT)
			}
		}
	}
	srv.kill(t)
	os.Remove(sock)
	return func() {
		if !done {
			done = true
			srv.start(t)
			waitListening(t, srv, sock)
		}
	}
}

// TestHandledSignalKeepsHostWait: a signal the caller handles (with
// SA_RESTART, as Go installs its handlers) while a stat waits for the
// stopped host does not fail the stat with EINTR: it completes once the
// host is back.
func TestHandledSignalKeepsHostWait(t *testing.T) {
	p := newPaths(t)
	if err := os.WriteFile(filepath.Join(p.export, "f"), []byte("x"), 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	srv := startServe(t, p.export, p.sock, false)
	startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", "unix://"+p.sock, "--host-timeout", "hard")
	back := hostAway(t, srv, p.sock, "stopped")
	defer back()
	child := exec.Command(os.Args[0], "-test.run=^TestHelperStat$")
	child.Env = append(os.Environ(), "CACHEFS_HELPER_STAT="+filepath.Join(p.mnt, "f"))
	out := &syncBuffer{}
	child.Stderr = out
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatalf("StdoutPipe: %v", err)
	}
	if err := child.Start(); err != nil {
		t.Fatalf("start the stat helper: %v", err)
	}
	var tid int
	if _, err := fmt.Fscan(stdout, &tid); err != nil {
		t.Fatalf("reading the stat helper's thread id: %v", err)
	}
	go io.Copy(out, stdout)
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	for i := 0; i < 5; i++ {
		time.Sleep(200 * time.Millisecond)
		if unix.Tgkill(child.Process.Pid, tid, syscall.SIGUSR1) != nil {
			break // it ended: done says how
		}
	}
	back()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stat interrupted by handled signals: %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		child.Process.Kill()
		t.Errorf("stat still blocked 20s after the host came back")
	}
}

// TestHelperStat is the child of TestHandledSignalKeepsHostWait: it
// handles SIGUSR1, prints its thread id and makes one stat(2) on that
// thread, not retried on EINTR.
func TestHelperStat(t *testing.T) {
	path := os.Getenv("CACHEFS_HELPER_STAT")
	if path == "" {
		t.Skip("a helper process of TestHandledSignalKeepsHostWait")
	}
	signal.Notify(make(chan os.Signal, 10), syscall.SIGUSR1)
	runtime.LockOSThread()
	fmt.Println(syscall.Gettid()) // the thread the signals go to
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		fmt.Printf("stat: %v\n", err)
		os.Exit(3)
	}
}

// TestGuestAnswersWhileHostAway: what the guest holds is answered while
// the host is away (killed, or stopped with its connection up): a stat
// and a read of a file of a cached subtree (the mount's default mode)
// read before. --host-timeout 2s bounds what would wrongly wait for the
// host. Delegated subtrees are not answered yet once their changes are
// written back, nor registered ones under a consistent default
// (docs/faults.md).
func TestGuestAnswersWhileHostAway(t *testing.T) {
	for _, how := range []string{"killed", "stopped"} {
		t.Run(how, func(t *testing.T) { testGuestAnswers(t, how) })
	}
}

func testGuestAnswers(t *testing.T, how string) {
	p := newPaths(t)
	data := pattern(7, 256<<10)
	if err := os.MkdirAll(filepath.Join(p.export, "sub"), 0o755); err != nil {
		t.Fatalf("MkdirAll: %v", err)
	}
	if err := os.WriteFile(filepath.Join(p.export, "sub", "a"), data, 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	srv := startServe(t, p.export, p.sock, false)
	startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", "unix://"+p.sock, "--host-timeout", "2s",
		"--default-mode", "cached")
	path := filepath.Join(p.mnt, "sub", "a")
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile with the host up: %d bytes, %v", len(got), err)
	}
	defer hostAway(t, srv, p.sock, how)()
	if fi, err := os.Stat(path); err != nil || fi.Size() != int64(len(data)) {
		t.Errorf("Stat with the host away: %v, %v; want %d bytes", fi, err, len(data))
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadFile with the host away: %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
}

// stopped reports whether every thread of process pid is stopped.
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces, the state follows its ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

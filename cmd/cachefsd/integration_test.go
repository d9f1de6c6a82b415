//go:build linux

package main

// End-to-end tests: TestMain builds the cachefsd binary once, and each
// test runs it as real processes (serve, mount, local, ctl) against a
// temporary export and mountpoint. Tests skip, with a reason, where
// /dev/fuse or a tool they need (fio, prlimit) is missing.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cachefsdBin is the binary TestMain built.
var cachefsdBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cachefsd-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cachefsdBin = filepath.Join(dir, "cachefsd")
	if out, err := exec.Command("go", "build", "-o", cachefsdBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building cachefsd: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// longRun reports whether CACHEFS_LONG=1 asks for the full-size runs,
// which take longer than go test's default 10 minute timeout.
func longRun() bool { return os.Getenv("CACHEFS_LONG") == "1" }

// longTimeout bounds a command that runs longer with CACHEFS_LONG=1.
func longTimeout(short, long time.Duration) time.Duration {
	if longRun() {
		return long
	}
	return short
}

func requireFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE: %v", err)
	}
}

// requireOverlays skips a test that mounts overlays where it cannot.
func requireOverlays(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("overlays need root")
	}
}

func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed (scripts/setup.sh installs it): %v", name, err)
	}
}

// syncBuffer collects a daemon's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// daemon is a cachefsd (or prlimit'ed cachefsd) process of a test. Its
// output is logged when the test fails.
type daemon struct {
	name string
	argv []string    // immutable
	out  *syncBuffer // immutable pointer; all runs' output
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// startDaemon starts argv and stops it in t.Cleanup, even if it was
// restarted meanwhile.
func startDaemon(t *testing.T, name string, argv ...string) *daemon {
	t.Helper()
	d := &daemon{name: name, argv: argv, out: &syncBuffer{}}
	d.start(t)
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("%s (pid %d) output:\n%s", name, d.pid(), tail(d.out.String(), 4000))
		}
	})
	return d
}

func (d *daemon) start(t *testing.T) {
	t.Helper()
	cmd, done := exec.Command(d.argv[0], d.argv[1:]...), make(chan struct{})
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", d.name, err)
	}
	go func() {
		cmd.Wait()
		close(done)
	}()
	d.cmd, d.done = cmd, done
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// kill ends the process at once, as a crash would.
func (d *daemon) kill(t *testing.T) {
	d.cmd.Process.Signal(syscall.SIGKILL)
	if !d.wait(10 * time.Second) {
		t.Fatalf("%s (pid %d) survived SIGKILL", d.name, d.pid())
	}
}

// stop asks the process to end with SIGTERM and kills it if it does not
// within 10s, which is an error: SIGTERM must end every daemon.
func (d *daemon) stop(t *testing.T) {
	if d.exited() {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	if d.wait(10 * time.Second) {
		return
	}
	t.Errorf("%s (pid %d) still running 10s after SIGTERM; killing it", d.name, d.pid())
	d.kill(t)
}

func (d *daemon) wait(timeout time.Duration) bool {
	select {
	case <-d.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// startServe runs `cachefsd serve` on the unix socket sock, under
// `prlimit --nofile=1024:1024` when lowFDs is set, and waits until it
// listens.
func startServe(t *testing.T, export, sock string, lowFDs bool) *daemon {
	t.Helper()
	argv := []string{cachefsdBin, "serve", "--export", export, "--listen", "unix://" + sock}
	if lowFDs {
		requireTool(t, "prlimit")
		argv = append([]string{"prlimit", "--nofile=1024:1024"}, argv...)
	}
	os.Remove(sock)
	d := startDaemon(t, "serve", argv...)
	waitListening(t, d, sock)
	return d
}

// restartServe kills a server with SIGKILL, as a crash would, and
// starts it again on the same socket after pause.
func restartServe(t *testing.T, d *daemon, sock string, pause time.Duration) {
	t.Helper()
	d.kill(t)
	time.Sleep(pause)
	os.Remove(sock) // the killed server's: wait for the new one
	d.out.Write([]byte("--- restarted ---\n"))
	d.start(t)
	waitListening(t, d, sock)
}

func waitListening(t *testing.T, d *daemon, sock string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the server's socket", func() bool { return isSocket(sock) || d.exited() })
	if d.exited() {
		t.Fatalf("serve exited: %s", d.out.String())
	}
}

// startGuest runs `cachefsd mount` or `cachefsd local` (argv without the
// control socket and mountpoint) and waits until the mount is up, which
// is when the control socket accepts. Cleanup stops it (SIGTERM
// unmounts) and detaches a mount a killed daemon left behind.
func startGuest(t *testing.T, name, mnt, ctl string, argv ...string) *daemon {
	t.Helper()
	requireFUSE(t)
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	argv = append(append([]string{cachefsdBin}, argv...), "--ctl", ctl, mnt)
	d := startDaemon(t, name, argv...)
	waitMounted(t, d, mnt, ctl)
	return d
}

// waitMounted waits until guest daemon d has mounted mnt, which is when
// its control socket ctl accepts (a killed daemon's may still be there).
func waitMounted(t *testing.T, d *daemon, mnt, ctl string) {
	t.Helper()
	waitFor(t, 15*time.Second, "the mount", func() bool { return accepts(ctl) || d.exited() })
	if d.exited() {
		t.Fatalf("%s exited: %s", d.name, d.out.String())
	}
	if !isMounted(t, mnt) {
		t.Fatalf("%s not in /proc/self/mountinfo", mnt)
	}
}

// startMount runs `cachefsd mount` of the server on sock with the
// default mode given.
func startMount(t *testing.T, sock, mnt, ctl, mode string) *daemon {
	t.Helper()
	return startGuest(t, "mount", mnt, ctl, "mount", "--upstream", "unix://"+sock, "--default-mode", mode)
}

func isMounted(t *testing.T, mnt string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mnt {
			return true
		}
	}
	return false
}

// paths are the directories and sockets of one test.
type paths struct {
	export, mnt, sock, ctl string
}

func newPaths(t *testing.T) paths {
	sockDir := t.TempDir()
	return paths{export: t.TempDir(), mnt: t.TempDir(),
		sock: filepath.Join(sockDir, "s"), ctl: filepath.Join(sockDir, "ctl")}
}

// run runs a command and returns its stdout, stderr and error, within
// timeout.
func run(timeout time.Duration, argv ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%v (timed out after %v)", err, timeout)
	}
	return stdout.String(), stderr.String(), err
}

//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopBusy: the first SIGTERM on a mount a process holds (its
// working directory) writes delegated changes back, names the holder
// and keeps serving; the second writes back what came since, then
// detaches the mount; the daemon exits once the holder lets go.
func TestStopBusy(t *testing.T) {
	p := newPaths(t)
	srv := startServe(t, p.export, p.sock, false)
	guest := startDelegatedMount(t, p, t.TempDir())
	holder := exec.Command("sleep", "1000")
	holder.Dir = p.mnt
	if err := holder.Start(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	writeThrough(t, p, "a")

	guest.cmd.Process.Signal(syscall.SIGTERM)
	busy := fmt.Sprintf("pid %d (sleep): cwd %s", holder.Process.Pid, p.mnt)
	waitFor(t, 10*time.Second, "the holder named in the log", func() bool { return strings.Contains(guest.out.String(), busy) })
	wantContent(t, filepath.Join(p.export, "a"), []byte("a"))
	if !isMounted(t, p.mnt) {
		t.Fatalf("the busy mount was unmounted")
	}
	writeThrough(t, p, "b") // still served

	srv.cmd.Process.Signal(syscall.SIGSTOP) // b's write-back waits
	t.Cleanup(func() { srv.cmd.Process.Signal(syscall.SIGCONT) })
	writeThrough(t, p, "c")
	guest.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(100 * time.Millisecond) // time to detach too early, if it would
	if !isMounted(t, p.mnt) {
		t.Fatalf("detached before the write-back")
	}
	srv.cmd.Process.Signal(syscall.SIGCONT)
	waitFor(t, 10*time.Second, "the detach", func() bool { return !isMounted(t, p.mnt) })
	wantContent(t, filepath.Join(p.export, "c"), []byte("c"))
	if guest.exited() {
		t.Fatalf("the daemon exited with its detached mount still held")
	}
	holder.Process.Kill()
	holder.Wait()
	if !guest.wait(10 * time.Second) {
		t.Fatalf("the daemon still runs 10s after the last holder of its detached mount exited")
	}
}

// writeThrough writes file name, holding its name, through the mount.
func writeThrough(t *testing.T, p paths, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.mnt, name), []byte(name), 0o644); err != nil {
		t.Fatalf("WriteFile %s: %v", name, err)
	}
}

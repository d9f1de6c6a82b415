//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	workFiles = 200
	workSize  = 64 << 10
	keepSize  = 1 << 20
)

// pattern returns size bytes that differ for every file id and 8-byte
// offset, so a misplaced or foreign block shows.
func pattern(id, size int) []byte {
	b := make([]byte, size)
	for off := 0; off+8 <= size; off += 8 {
		binary.LittleEndian.PutUint64(b[off:], uint64(id)<<40|uint64(off))
	}
	return b
}

func workName(i int) string { return fmt.Sprintf("w%03d", i) }

// errCorrupt marks a file that was written and read back without an
// error but with the wrong content: silent corruption, never retried.
var errCorrupt = errors.New("read back different content")

// writeAndCheck writes file i through dir and reads it back.
func writeAndCheck(dir string, i int) error {
	path, want := filepath.Join(dir, workName(i)), pattern(i, workSize)
	if err := os.WriteFile(path, want, 0o644); err != nil {
		return err
	}
	got, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s: %w (%d bytes)", workName(i), errCorrupt, len(got))
	}
	return nil
}

// workResult is what the workload saw: errors it recovered from by
// retrying a file, and failures it did not recover from.
type workResult struct {
	retried  []error
	failures []error
}

// runWorkload writes and checks workFiles files through dir, retrying a
// file once after an error; it closes half when half the files are done.
func runWorkload(dir string, half chan<- struct{}) workResult {
	var r workResult
	for i := 0; i < workFiles; i++ {
		if i == workFiles/2 {
			close(half)
		}
		err := writeAndCheck(dir, i)
		if err != nil && !errors.Is(err, errCorrupt) {
			r.retried = append(r.retried, err)
			err = writeAndCheck(dir, i)
		}
		if err != nil {
			r.failures = append(r.failures, err)
		}
	}
	return r
}

// TestServerRestartMidWorkload kills the host server with SIGKILL while
// a workload writes through the mount and restarts it on the same
// socket: the guest reconnects to a new host session, the workload
// completes with every file right on the host (in delegated mode once
// `ctl flush` has written it back), and a file kept open across the
// restart still reads right.
func TestServerRestartMidWorkload(t *testing.T) {
	for _, mode := range []string{"consistent", "cached", "delegated"} {
		t.Run(mode, func(t *testing.T) { testServerRestart(t, mode) })
	}
}

func testServerRestart(t *testing.T, mode string) {
	requireFUSE(t)
	p := newPaths(t)
	keep := pattern(1000, keepSize)
	if err := os.WriteFile(filepath.Join(p.export, "keep"), keep, 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	srv := startServe(t, p.export, p.sock, false)
	guest := startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", "unix://"+p.sock,
		"--default-mode", mode, "--state-dir", t.TempDir())
	f := openAndRead(t, filepath.Join(p.mnt, "keep"), keep[:keepSize/8])

	half, done := make(chan struct{}), make(chan workResult, 1)
	start := time.Now()
	go func() { done <- runWorkload(p.mnt, half) }()
	<-half
	restartServe(t, srv, p.sock, 300*time.Millisecond)
	var res workResult
	select {
	case res = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("workload not done 3 minutes after the restart")
	}
	t.Logf("%s: workload took %v; %d files retried: %v", mode, time.Since(start), len(res.retried), res.retried)
	for _, err := range res.failures {
		t.Errorf("workload: %v", err)
	}
	if mode == "delegated" {
		ctlOK(t, p.ctl, "flush")
	}
	if !strings.Contains(guest.out.String(), "reconnected to host") {
		t.Errorf("the mount never logged reconnecting:\n%s", guest.out.String())
	}
	checkHostFiles(t, p.export)
	checkKeptOpen(t, f, keep, p.ctl)
	checkUsable(t, p.mnt)
}

// openAndRead opens path and checks its first len(want) bytes.
func openAndRead(t *testing.T, path string, want []byte) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatalf("ReadAt: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: first %d bytes differ", path, len(want))
	}
	return f
}

// checkHostFiles asserts every workload file is on the host, whole.
func checkHostFiles(t *testing.T, export string) {
	t.Helper()
	for i := 0; i < workFiles; i++ {
		got, err := os.ReadFile(filepath.Join(export, workName(i)))
		if err != nil {
			t.Errorf("host: %v", err)
			continue
		}
		if !bytes.Equal(got, pattern(i, workSize)) {
			t.Errorf("host file %s: %d bytes, not what was written (silent corruption)", workName(i), len(got))
		}
	}
}

// checkKeptOpen reads the rest of a file opened before the restart,
// from the host: the guest must reopen it in the new host session, or
// read it by node if it never needed a handle (a lazy open).
func checkKeptOpen(t *testing.T, f *os.File, want []byte, ctl string) {
	t.Helper()
	before := ctlStats(t, ctl).hostReads()
	got := make([]byte, len(want)/2)
	if _, err := f.ReadAt(got, int64(len(want)/2)); err != nil {
		t.Fatalf("ReadAt after the restart: %v", err)
	}
	if !bytes.Equal(got, want[len(want)/2:]) {
		t.Errorf("file kept open across the restart: second half differs")
	}
	if after := ctlStats(t, ctl).hostReads(); after == before {
		t.Errorf("reads of the kept file after the restart never reached the host (%d reads before and after)", after)
	}
}

// checkUsable asserts stat and readdir work through the mount.
func checkUsable(t *testing.T, mnt string) {
	t.Helper()
	fi, err := os.Stat(filepath.Join(mnt, workName(workFiles-1)))
	if err != nil || fi.Size() != workSize {
		t.Errorf("Stat after the restart: %v, %v", fi, err)
	}
	ents, err := os.ReadDir(mnt)
	if err != nil || len(ents) != workFiles+1 {
		t.Errorf("ReadDir after the restart: %d entries, %v; want %d", len(ents), err, workFiles+1)
	}
}

// TestServerGoneFailsCleanly kills the host server for good: a stat
// through the mount must fail with a link error within the client's
// reconnect bound (--host-timeout, 3s here), not hang, and the mount must
// still unmount on SIGTERM.
func TestServerGoneFailsCleanly(t *testing.T) {
	requireFUSE(t)
	p := newPaths(t)
	if err := os.WriteFile(filepath.Join(p.export, "f"), []byte("x"), 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	srv := startServe(t, p.export, p.sock, false)
	guest := startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", "unix://"+p.sock, "--host-timeout", "3s")
	if _, err := os.Stat(filepath.Join(p.mnt, "f")); err != nil {
		t.Fatalf("Stat: %v", err)
	}
	srv.kill(t)
	os.Remove(p.sock)

	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		_, err := os.Stat(filepath.Join(p.mnt, "f"))
		errc <- err
	}()
	select {
	case err := <-errc:
		t.Logf("stat failed after %v: %v", time.Since(start), err)
		checkLinkError(t, err)
	case <-time.After(45 * time.Second):
		t.Fatalf("stat with the server gone still blocked after 45s")
	}
	if guest.exited() {
		t.Errorf("the mount daemon exited with the server gone:\n%s", guest.out.String())
	}
}

// checkLinkError asserts err is an error a lost link may give.
func checkLinkError(t *testing.T, err error) {
	t.Helper()
	for _, want := range []syscall.Errno{syscall.EIO, syscall.ENOTCONN, syscall.ETIMEDOUT,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EHOSTDOWN} {
		if errors.Is(err, want) {
			return
		}
	}
	t.Errorf("stat with the server gone: got %v, want EIO, ENOTCONN, ETIMEDOUT or the like", err)
}

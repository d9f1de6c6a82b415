//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenFilesBounded: the guest holds 3,000 files open at once, each
// created and written through the mount, while the server and the guest
// daemon each run under an open-file limit of 1024 (prlimit): in every
// mode each open, write and close succeeds, neither daemon reaches its
// limit, and after a flush every file is on the host. The seed's fio
// command at scale (issue 20): in delegated mode the daemon held a
// descriptor per open file and failed with EMFILE.
func TestOpenFilesBounded(t *testing.T) {
	requireTool(t, "prlimit")
	for _, mode := range []string{"consistent", "cached", "delegated"} {
		t.Run(mode, func(t *testing.T) { testOpenFilesBounded(t, mode) })
	}
}

const openFilesHeld = 3000

func testOpenFilesBounded(t *testing.T, mode string) {
	requireFUSE(t)
	p := newPaths(t)
	if err := os.Mkdir(filepath.Join(p.export, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, p.export, p.sock, true)
	guest := startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", "unix://"+p.sock,
		"--default-mode", mode, "--state-dir", t.TempDir())
	guestFDs := relimit(t, guest.pid())
	srvFDs := sampleFDs(srv.pid())
	files := make([]*os.File, 0, openFilesHeld)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i := range openFilesHeld {
		f, err := os.OpenFile(filepath.Join(p.mnt, "dir", fmt.Sprintf("f%04d", i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatalf("open file %d of %d held open: %v", i, openFilesHeld, err)
		}
		files = append(files, f)
		if _, err := f.WriteString(fmt.Sprintf("file %d\n", i)); err != nil {
			t.Fatalf("write file %d: %v", i, err)
		}
	}
	for i, f := range files {
		if err := f.Close(); err != nil {
			t.Errorf("close file %d: %v", i, err)
		}
	}
	files = nil
	ctlOK(t, p.ctl, "flush")
	gmax, gn := guestFDs.stop()
	smax, sn := srvFDs.stop()
	t.Logf("%d files held open: guest daemon fds max %d (%d samples), server fds max %d (%d samples)", openFilesHeld, gmax, gn, smax, sn)
	if gmax >= 1024 || smax >= 1024 || gn == 0 || sn == 0 {
		t.Errorf("fds: guest daemon max %d over %d samples, server max %d over %d, want under 1024", gmax, gn, smax, sn)
	}
	for _, d := range []*daemon{srv, guest} {
		if strings.Contains(d.out.String(), "too many open files") {
			t.Errorf("%s ran out of fds:\n%s", d.name, tail(d.out.String(), 2000))
		}
	}
	for i := range openFilesHeld {
		b, err := os.ReadFile(filepath.Join(p.export, "dir", fmt.Sprintf("f%04d", i)))
		if want := fmt.Sprintf("file %d\n", i); err != nil || string(b) != want {
			t.Fatalf("host file %d: %q %v, want %q", i, b, err, want)
		}
	}
}

// relimit lowers a running daemon's open-file limit to 1024 (prlimit
// on its pid: the guest is started by startGuest, without a wrapper)
// and samples its fds.
func relimit(t *testing.T, pid int) *fdSampler {
	t.Helper()
	if out, _, err := run(10*time.Second, "prlimit", "--pid", fmt.Sprint(pid), "--nofile=1024:1024"); err != nil {
		t.Fatalf("prlimit --pid %d: %v %s", pid, err, out)
	}
	if got := openFileLimit(t, pid); got != 1024 {
		t.Fatalf("guest daemon's open-file limit: got %d, want 1024", got)
	}
	return sampleFDs(pid)
}

//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fioArgs is the small-file test virtiofs users run, through dir.
//
// With CACHEFS_LONG=1 it is their command exactly. Otherwise it runs for
// 10s instead of 30s, and with 1,000 files per job instead of 10,000:
// before writing, fio stats each of its numjobs*nrfiles files several
// times, and in consistent mode every stat is a round trip for the
// directory and one for the missing name, so 100,000 files took about
// 4m40s of setup here (1.5M requests). 10,000 files (the same 10 jobs)
// are still ten times the server's open-file limit.
func fioArgs(dir string) []string {
	runtime, nrfiles := "10", "1000"
	if longRun() {
		runtime, nrfiles = "30", "10000"
	}
	return []string{"fio", "--name=filetest", "--rw=write", "--bs=4k", "--size=4k", "--numjobs=10",
		"--filesize=4k", "--directory=" + dir, "--create_on_open=1", "--file_service_type=random",
		"--nrfiles=" + nrfiles, "--runtime=" + runtime, "--time_based", "--group_reporting",
		"--ioengine=psync"}
}

var (
	fioErrRe    = regexp.MustCompile(`err=\s*(-?\d+)`)
	fioIssuedRe = regexp.MustCompile(`issued rwts: total=\d+,(\d+),`)
)

// TestFioSmallFiles runs fio's small-file write test through a
// consistent mount of a server limited to 1024 open files: fio must
// succeed, its files must be on the host, and the server must stay
// under its fd limit throughout.
func TestFioSmallFiles(t *testing.T) {
	requireTool(t, "fio")
	requireFUSE(t)
	p := newPaths(t)
	if err := os.Mkdir(filepath.Join(p.export, "dir"), 0o755); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	srv := startServe(t, p.export, p.sock, true)
	if got := openFileLimit(t, srv.pid()); got != 1024 {
		t.Fatalf("server's open-file limit: got %d, want 1024", got)
	}
	startMount(t, p.sock, p.mnt, p.ctl, "consistent")

	fds := sampleFDs(srv.pid())
	start := time.Now()
	out, stderr, err := run(longTimeout(5*time.Minute, 20*time.Minute), fioArgs(filepath.Join(p.mnt, "dir"))...)
	maxFDs, samples := fds.stop()
	t.Logf("fio took %v; server fds: max %d over %d samples", time.Since(start), maxFDs, samples)
	if err != nil {
		t.Fatalf("fio: %v\n%s\n%s", err, stderr, out)
	}
	written := checkFioOutput(t, out)
	if maxFDs >= 1024 || samples == 0 {
		t.Errorf("server fds: max %d over %d samples, want under 1024", maxFDs, samples)
	}
	if strings.Contains(srv.out.String(), "too many open files") {
		t.Errorf("server ran out of fds:\n%s", tail(srv.out.String(), 2000))
	}
	checkFioFiles(t, p, written)
}

// checkFioOutput asserts fio reported no error and returns how many
// writes it issued.
func checkFioOutput(t *testing.T, out string) int {
	t.Helper()
	errs := fioErrRe.FindAllStringSubmatch(out, -1)
	if len(errs) == 0 {
		t.Fatalf("no err= in fio's output:\n%s", out)
	}
	for _, m := range errs {
		if m[1] != "0" {
			t.Errorf("fio: err=%s, want 0", m[1])
		}
	}
	m := fioIssuedRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no issued writes in fio's output:\n%s", out)
	}
	n, _ := strconv.Atoi(m[1])
	if n == 0 {
		t.Fatalf("fio issued no writes:\n%s", out)
	}
	return n
}

// checkFioFiles asserts fio's files are on the host, 4 KiB each, at
// most one per write issued, and read the same through the mount.
func checkFioFiles(t *testing.T, p paths, written int) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(p.export, "dir"))
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	if len(ents) == 0 || len(ents) > written {
		t.Fatalf("files on the host: got %d, want 1..%d (writes issued)", len(ents), written)
	}
	t.Logf("%d writes issued, %d files on the host", written, len(ents))
	for i, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatalf("Info: %v", err)
		}
		if !strings.HasPrefix(e.Name(), "filetest.") || fi.Size() != 4096 {
			t.Errorf("host file %s of %d bytes, want filetest.* of 4096", e.Name(), fi.Size())
			continue
		}
		if i%(len(ents)/50+1) == 0 {
			sameThroughMount(t, p, filepath.Join("dir", e.Name()))
		}
	}
}

// sameThroughMount asserts a file reads the same on the host and through
// the mount.
func sameThroughMount(t *testing.T, p paths, rel string) {
	t.Helper()
	host, err := os.ReadFile(filepath.Join(p.export, rel))
	if err != nil {
		t.Fatalf("ReadFile host: %v", err)
	}
	guest, err := os.ReadFile(filepath.Join(p.mnt, rel))
	if err != nil {
		t.Fatalf("ReadFile mount: %v", err)
	}
	if !bytes.Equal(host, guest) {
		t.Errorf("%s: %d bytes through the mount differ from the host's %d", rel, len(guest), len(host))
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A workload runs its phases, each timed on its own, on one fresh mount.
type workload struct {
	Name string
	// Input is the data copied into each system's export before it is
	// mounted ("tree", "gosrc", "ember", "bigdir"); empty: an empty
	// export. Inputs are made before the first system is measured; a
	// workload whose input cannot be made is skipped with the reason.
	Input string
	// Mutates makes every run start from a new empty export.
	Mutates bool
	// Network marks a workload whose input is fetched the first time
	// (ember's npm packages); it is not in --quick's default set.
	Network bool
	Phases  []phase
	// Verify, if set, checks the export after the unmount and returns
	// a summary that must agree across systems.
	Verify func(r *runner, export string) (string, error)
}

// A phase is one measured step. Run returns a summary of what it saw
// (e.g. "83731 entries") that must agree across systems.
type phase struct {
	Name string
	Run  func(ctx context.Context, r *runner, dir string) (string, error)
}

// workloads is the table of every workload, in report order.
var workloads = []workload{
	{Name: "dd", Mutates: true, Phases: []phase{{Name: "dd 1 KiB writes", Run: runDD}}},
	{Name: "stat", Input: "tree", Phases: []phase{
		{Name: "stat walk cold", Run: runStatWalk}, {Name: "stat walk warm", Run: runStatWalk}}},
	{Name: "golist", Input: "gosrc", Phases: []phase{
		{Name: "go list cold", Run: runGoList}, {Name: "go list warm", Run: runGoList}}},
	{Name: "ember", Input: "ember", Network: true, Phases: []phase{
		{Name: "ember build cold", Run: runEmberBuild}, {Name: "ember cold flush", Run: runFlush},
		{Name: "ember build warm", Run: runEmberBuild}, {Name: "ember warm flush", Run: runFlush}}},
	{Name: "untar", Mutates: true, Phases: []phase{{Name: "untar", Run: runUntar},
		{Name: "untar flush", Run: runFlush}}, Verify: countEntries},
	{Name: "grep", Input: "tree", Phases: []phase{
		{Name: "grep -r cold", Run: runGrep}, {Name: "grep -r warm", Run: runGrep}}},
	{Name: "ls", Input: "bigdir", Phases: []phase{
		{Name: "ls -l cold", Run: runLs}, {Name: "ls -l warm", Run: runLs}}},
	{Name: "fio", Mutates: true, Phases: []phase{{Name: "fio small files", Run: runFio}}, Verify: countEntries},
}

func findWorkload(name string) (*workload, error) {
	for i := range workloads {
		if workloads[i].Name == name {
			return &workloads[i], nil
		}
	}
	return nil, fmt.Errorf("unknown workload %q", name)
}

// command runs name in dir and returns its standard output. It runs in
// a process group of its own, which is killed when ctx ends, so that
// helpers it started (ember's workers) do not keep the mount busy.
func command(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s: %v: %s", name, err, firstLines(stderr.String(), 3))
	}
	return stdout.Bytes(), nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

func runDD(ctx context.Context, r *runner, dir string) (string, error) {
	n := r.size.DDCount
	if _, err := command(ctx, dir, nil, "dd", "if=/dev/zero", "of=ddfile", "bs=1k",
		fmt.Sprintf("count=%d", n), "status=none"); err != nil {
		return "", err
	}
	st, err := os.Stat(filepath.Join(dir, "ddfile"))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes", st.Size()), nil
}

// runStatWalk reads every directory of the tree and lstats every entry.
func runStatWalk(ctx context.Context, r *runner, dir string) (string, error) {
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, "tree"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, err := os.Lstat(p); err != nil {
			return err
		}
		n++
		return nil
	})
	return fmt.Sprintf("%d entries", n), err
}

// goEnv makes go list read only the copy and the toolchain's GOROOT.
var goEnv = []string{"GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local", "GOPROXY=off"}

// runGoList lists every package of the copy of GOROOT/src, a module
// named std whose packages are std/...; see inputs.go.
func runGoList(ctx context.Context, r *runner, dir string) (string, error) {
	out, err := command(ctx, filepath.Join(dir, "src"), goEnv, "go", "list", "-e",
		"-f", "{{.ImportPath}}{{with .Error}} ERROR{{end}}", "./...")
	if err != nil {
		return "", err
	}
	pkgs, bad := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		pkgs++
		if strings.HasSuffix(sc.Text(), " ERROR") {
			bad++
		}
	}
	return fmt.Sprintf("%d packages, %d with errors", pkgs, bad), nil
}

func runUntar(ctx context.Context, r *runner, dir string) (string, error) {
	tarball, err := r.inputTar()
	if err != nil {
		return "", err
	}
	_, err = command(ctx, dir, nil, "tar", "-xf", tarball)
	return "", err
}

// runFlush waits until a cachefs daemon has written everything back to
// the host (`cachefsd ctl flush`): for delegated mode, the time after a
// workload until the host has its result. Other systems have nothing to
// wait for.
func runFlush(ctx context.Context, r *runner, dir string) (string, error) {
	m := r.mountAt(dir)
	if m == nil || m.ctl == "" {
		return "", nil
	}
	tool, err := r.toolPath("cachefsd")
	if err != nil {
		return "", err
	}
	_, err = command(ctx, dir, nil, tool, "ctl", "--socket", m.ctl, "flush")
	return "", err
}

// countEntries counts what a mutating workload left in the export.
func countEntries(r *runner, export string) (string, error) {
	n := 0
	err := filepath.WalkDir(export, func(p string, d fs.DirEntry, err error) error {
		n++
		return err
	})
	return fmt.Sprintf("%d entries", n-1), err
}

// grepPattern occurs in about a third of the kernel's C files.
const grepPattern = "EXPORT_SYMBOL"

func runGrep(ctx context.Context, r *runner, dir string) (string, error) {
	out, err := command(ctx, dir, nil, "grep", "-r", "-I", "-c", "-F", grepPattern, "tree")
	if err != nil {
		return "", err
	}
	files, hits := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var n int
		if i := strings.LastIndexByte(line, ':'); i >= 0 {
			fmt.Sscan(line[i+1:], &n)
		}
		files++
		hits += n
	}
	return fmt.Sprintf("%d files, %d matching lines", files, hits), nil
}

func runLs(ctx context.Context, r *runner, dir string) (string, error) {
	out, err := command(ctx, dir, []string{"LC_ALL=C"}, "ls", "-l", "big")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d lines", bytes.Count(out, []byte("\n"))), nil
}

// runFio creates FioFiles files of 4 KiB in each of FioJobs jobs.
func runFio(ctx context.Context, r *runner, dir string) (string, error) {
	_, err := command(ctx, dir, nil, "fio", "--name=smallfiles", "--directory="+dir,
		fmt.Sprintf("--numjobs=%d", r.size.FioJobs), fmt.Sprintf("--nrfiles=%d", r.size.FioFiles),
		"--filesize=4k", "--bs=4k", "--rw=write", "--create_on_open=1", "--openfiles=16",
		"--file_service_type=sequential", "--ioengine=psync", "--fallocate=none",
		"--output-format=terse")
	return "", err
}

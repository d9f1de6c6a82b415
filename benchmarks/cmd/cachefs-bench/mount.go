package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A mount is a running system: the directory workloads use and, except
// for native, the daemon that serves it.
type mount struct {
	Dir    string // where workloads run
	mnt    string // mountpoint; empty for native
	ctl    string // control socket of a cachefs daemon
	roots  []int  // daemon processes; their descendants count too
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// mount starts system s over export at mnt and waits until it serves.
func (r *runner) mount(s *system, export, mnt string) (*mount, error) {
	if s.Tool == "" {
		return &mount{Dir: export}, nil
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, err
	}
	tool, err := r.toolPath(s.Tool)
	if err != nil {
		return nil, err
	}
	r.seq++
	m := &mount{Dir: mnt, mnt: mnt, exited: make(chan struct{}),
		log: filepath.Join(r.cfg.Work, "logs", fmt.Sprintf("%03d-%s.log", r.seq, s.Name))}
	if s.Ctl {
		m.ctl = filepath.Join(r.cfg.Work, "s", fmt.Sprintf("%03d.sock", r.seq))
		os.MkdirAll(filepath.Dir(m.ctl), 0o755)
	}
	if err := r.startDaemon(m, tool, expandArgs(s.Args, export, mnt, m.ctl)); err != nil {
		return nil, err
	}
	m.roots = append([]int{m.cmd.Process.Pid}, s.roots...)
	if err := r.waitServing(m); err != nil {
		r.unmount(m)
		return nil, fmt.Errorf("%s: %v (log %s: %s)", s.Name, err, m.log, tail(m.log))
	}
	if s.Register != "" {
		if err := r.ctlRegister(m, s.Register); err != nil {
			r.unmount(m)
			return nil, fmt.Errorf("%s: %v", s.Name, err)
		}
	}
	return m, nil
}

func expandArgs(args []string, export, mnt, ctl string) []string {
	rep := strings.NewReplacer("{export}", export, "{mnt}", mnt, "{ctl}", ctl)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = rep.Replace(a)
	}
	return out
}

func (r *runner) startDaemon(m *mount, tool string, args []string) error {
	os.MkdirAll(filepath.Dir(m.log), 0o755)
	lf, err := os.Create(m.log)
	if err != nil {
		return err
	}
	m.cmd = exec.Command(tool, args...)
	m.cmd.Stdout, m.cmd.Stderr = lf, lf
	// Own process group, so that a terminal's ^C reaches only us and we
	// unmount in order; SIGTERM if we die without doing so.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := m.cmd.Start(); err != nil {
		lf.Close()
		return err
	}
	r.track(m)
	go func() {
		m.cmd.Wait()
		lf.Close()
		close(m.exited)
	}()
	return nil
}

// waitServing waits until the mountpoint is mounted and, for cachefs,
// the control socket answers.
func (r *runner) waitServing(m *mount) error {
	deadline := time.Now().Add(30 * time.Second)
	for !isMounted(m.mnt) {
		select {
		case <-m.exited:
			return fmt.Errorf("daemon exited before mounting: %v", m.cmd.ProcessState)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not mounted after 30s")
		}
	}
	if m.ctl == "" {
		return nil
	}
	for {
		if _, err := r.ctlStats(m); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("control socket: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unmount stops the daemon, which unmounts on SIGTERM; a lazy umount and
// SIGKILL follow if it does not within 20 s.
func (r *runner) unmount(m *mount) error {
	if m.cmd == nil {
		return nil
	}
	defer r.untrack(m)
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(20 * time.Second):
		exec.Command("umount", "-l", m.mnt).Run()
		m.cmd.Process.Kill()
		<-m.exited
		return fmt.Errorf("daemon did not stop on SIGTERM within 20s")
	}
	if isMounted(m.mnt) {
		exec.Command("umount", "-l", m.mnt).Run()
		return fmt.Errorf("daemon exited but %s stayed mounted", m.mnt)
	}
	return nil
}

// isMounted reports whether dir is a mountpoint, from mountinfo rather
// than stat, which would hang on a stuck FUSE mount.
func isMounted(dir string) bool {
	for _, p := range mountsUnder(dir) {
		if p == dir {
			return true
		}
	}
	return false
}

// mountsUnder lists the mountpoints at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountinfo(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append([]string{p}, out...)
		}
	}
	return out
}

func unescapeMountinfo(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

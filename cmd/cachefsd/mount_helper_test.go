//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMountHelper calls the binary as mount(8) calls mount.fuse.cachefs
// for `mount -t fuse.cachefs ADDR MNT -o ...`: it returns once the
// mount is up, served by a daemon in the background with the options
// as flags; an external umount stops that daemon. Bad options and a
// daemon that cannot start are errors with a message.
func TestMountHelper(t *testing.T) {
	requireFUSE(t)
	p, logFile := newPaths(t), filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(filepath.Join(p.export, "f"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	startServe(t, p.export, p.sock, false)
	helper := filepath.Join(t.TempDir(), "mount.fuse.cachefs")
	if err := os.Symlink(cachefsdBin, helper); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(p.mnt, unix.MNT_DETACH) })
	opts := "rw,nosuid,nodev,_netdev,x-systemd.automount,mode=cached,link-delay=0s,state-dir=" + t.TempDir() +
		",ctl=" + p.ctl + ",log=" + logFile
	if _, stderr, err := run(30*time.Second, helper, "unix://"+p.sock, p.mnt, "-o", opts); err != nil {
		t.Fatalf("mount.fuse.cachefs: %v\n%s", err, stderr)
	}
	pid := daemonOf(t, p.mnt)
	if b, err := os.ReadFile(filepath.Join(p.mnt, "f")); err != nil || string(b) != "host" {
		t.Errorf("read through the helper's mount: %q, %v", b, err)
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	for _, want := range []string{"--default-mode=cached", "--link-delay=0s"} {
		if !strings.Contains(string(cmdline), want) {
			t.Errorf("daemon command line %q lacks %s", cmdline, want)
		}
	}
	if err := unix.Unmount(p.mnt, 0); err != nil {
		t.Fatalf("umount: %v", err)
	}
	waitFor(t, 10*time.Second, "the daemon to exit after the umount", func() bool { return !processExists(pid) })
	if b, _ := os.ReadFile(logFile); !strings.Contains(string(b), "cachefsd: ready:") {
		t.Errorf("log=%s has no ready line:\n%s", logFile, b)
	}
	checkHelperErrors(t, p)
}

// checkHelperErrors: `cachefsd mount-helper` with a bad option, or whose
// daemon cannot reach the host, fails and says why.
func checkHelperErrors(t *testing.T, p paths) {
	t.Helper()
	for _, c := range []struct {
		opts string
		want string
	}{
		{"mode=cached,bogus=1", `unknown option "bogus=1"`},
		{"ctl=" + p.ctl, "no such file or directory"}, // nothing listens on the address given
	} {
		_, stderr, err := run(60*time.Second, cachefsdBin, "mount-helper", "unix://"+p.sock+".none", p.mnt, "-o", c.opts)
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("mount-helper -o %s: err %v, stderr %q; want a failure saying %q", c.opts, err, stderr, c.want)
		}
		if isMounted(t, p.mnt) {
			t.Fatalf("mount-helper -o %s left %s mounted", c.opts, p.mnt)
		}
	}
}

// daemonOf returns the pid of the cachefsd mount serving mnt.
func daemonOf(t *testing.T, mnt string) int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 2 && args[1] == "mount" && args[len(args)-1] == mnt {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	t.Fatalf("no cachefsd mount process for %s", mnt)
	return 0
}

func processExists(pid int) bool {
	return unix.Kill(pid, 0) == nil
}

package cachefs

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The guest's views of the main connection (its binds, RunDir/main)
// keep that connection alive after an outside `umount -l` of the
// mountpoint, and the daemon waiting for its end would wait for good.
// So the Guest watches the mount table (poll on /proc/self/mountinfo
// wakes on every change) and closes itself once the main mount has left
// the namespace.

// mountID returns the id of the mount at path.
func mountID(path string) (uint64, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_MNT_ID, &st); err != nil {
		return 0, err
	}
	return st.Mnt_id, nil
}

// startWatchMain watches for the end of the mount with id mnt.
func (g *Guest) startWatchMain(mnt uint64) {
	r, w, err := os.Pipe()
	if err != nil {
		g.main.opts.Logf("cachefs: not watching the mount table: %v", err)
		return
	}
	g.unwatch = w
	go g.watchMain(mnt, r)
}

// watchMain closes g when mount mnt is gone, or returns when stop is
// closed (Close).
func (g *Guest) watchMain(mnt uint64, stop *os.File) {
	defer stop.Close()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}, {Fd: int32(stop.Fd()), Events: unix.POLLIN}}
	for {
		// Checked first, and every few seconds besides: a change before
		// the file was opened does not wake the poll, nor, seen once
		// under load, did every change after.
		if !mounted(mnt) {
			g.main.opts.Logf("cachefs: %s was unmounted: taking the registrations' views down", g.mnt)
			g.Close()
			return
		}
		if _, err := unix.Poll(fds, 2000); err != nil && err != unix.EINTR {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
	}
}

// mounted reports whether mount id is in this namespace.
func mounted(id uint64) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return true
	}
	defer f.Close()
	want := strconv.FormatUint(id, 10) + " "
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), want) {
			return true
		}
	}
	return false
}

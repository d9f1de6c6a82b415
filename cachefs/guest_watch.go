package cachefs

import (
	"bufio"
	"fmt"
	"io"
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

// mountKey is what names one mount in the mount table: its id, which
// the kernel gives to another mount once this one is gone (any
// process's, in this namespace), and its device, our FUSE connection's
// while it lives.
type mountKey struct {
	id  uint64
	dev string // "major:minor", as mountinfo's third field
}

// mountOf returns the key of the mount at path.
func mountOf(path string) (mountKey, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_MNT_ID, &st); err != nil {
		return mountKey{}, err
	}
	return mountKey{id: st.Mnt_id, dev: fmt.Sprintf("%d:%d", st.Dev_major, st.Dev_minor)}, nil
}

// startWatchMain watches for the end of mount mnt.
func (g *Guest) startWatchMain(mnt mountKey) {
	g.watchMount(mnt, func() {
		g.main.opts.Logf("cachefs: %s was unmounted: taking the registrations' views down", g.mnt)
		g.Close()
	})
}

// OnUnmount calls gone once the mount now at path has left the
// namespace (an outside umount), unless the Guest is closed first: the
// daemon so notices the end of an overlay over its mountpoint
// (--default-mode delegated), which leaves the main mount in place.
func (g *Guest) OnUnmount(path string, gone func()) error {
	m, err := mountOf(path)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.watchMount(m, gone)
	return nil
}

// watchMount calls gone when mount m is gone; Close stops it. g.mu is
// held, or g not yet shared.
func (g *Guest) watchMount(m mountKey, gone func()) {
	r, w, err := os.Pipe()
	if err != nil {
		g.main.opts.Logf("cachefs: not watching the mount table: %v", err)
		return
	}
	g.unwatch = append(g.unwatch, w)
	go pollMount(m, r, gone)
}

// pollMount calls gone when mount m is gone, or returns when stop is
// closed.
func pollMount(m mountKey, stop *os.File, gone func()) {
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
		if !mounted(m) {
			gone()
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

// mounted reports whether mount m is in this namespace.
func mounted(m mountKey) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return true
	}
	defer f.Close()
	return mountedIn(f, m)
}

// mountedIn reports whether the mount table r (mountinfo's format) has
// mount m: its id with its device. The id alone is not enough: a mount
// made since ours went, by any process here, may have taken it (seen as
// a daemon not stopping after its umount while other tests mounted).
func mountedIn(r io.Reader, m mountKey) bool {
	want := strconv.FormatUint(m.id, 10)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 2 && f[0] == want && f[2] == m.dev {
			return true
		}
	}
	return false
}

package posixtest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Set-user-ID and set-group-ID bits dropped by writes and chown.

// nobody is the user and group the unprivileged callers run as.
const nobody = 65534

// asUser runs fn on an OS thread whose effective user and group are
// uid and gid, without supplementary groups or capabilities. Go's
// setresuid changes every thread; the raw system calls change only this
// one, which gets root's ids back after fn, or else ends (it stays
// locked).
func asUser(uid, gid int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		groups, err := unix.Getgroups()
		if err != nil {
			errc <- err
			return
		}
		errc <- setIDs(uid, gid, nil, fn)
		if setIDs(0, 0, groups, nil) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-errc
}

// setIDs sets this thread's effective user and group and its
// supplementary groups, then runs fn if not nil.
func setIDs(uid, gid int, groups []int, fn func() error) error {
	keep := ^uintptr(0)
	if uid == 0 { // regain the privilege first
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, 0, keep); e != 0 {
			return fmt.Errorf("setresuid: %w", e)
		}
	}
	gs := make([]uint32, len(groups)+1)
	for i, g := range groups {
		gs[i] = uint32(g)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&gs[0])), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, keep, uintptr(gid), keep); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	if fn == nil {
		return nil
	}
	return fn()
}

// WriteKillsSetid writes to set-id files as a user that is neither the
// owner nor privileged, through a descriptor root opened: the write
// clears set-user-ID, and set-group-ID where group execute is set or
// the writer is not in the file's group (else the bit stays), by
// buffered and by O_DIRECT writes. A chown by the owner, not root, clears both too.
func WriteKillsSetid(t *testing.T, dir string) {
	requireRoot(t)
	for i, c := range []struct {
		mode, want uint32
		gid        int
		flags      int
	}{
		{06777, 0777, 0, 0}, {04766, 0766, 0, 0}, {02766, 0766, 0, 0}, {02776, 0776, nobody, 0},
		{02766, 02766, nobody, 0}, {06777, 0777, 0, unix.O_DIRECT},
	} {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		writeFile(t, p, "x")
		check(t, os.Chown(p, 0, c.gid), "Chown")
		check(t, unix.Chmod(p, c.mode), "Chmod")
		f := open(t, p, os.O_WRONLY|c.flags, 0)
		buf := alignedBuf(t, 4096, 'w')
		err := asUser(nobody, nobody, func() error {
			_, err := unix.Pwrite(int(f.Fd()), buf, 0)
			return err
		})
		check(t, err, "write as nobody")
		eq(t, fmt.Sprintf("mode %o after a write by nobody", c.mode), lstat(t, p).Mode&07777, c.want)
		eq(t, fmt.Sprintf("mode %o by fstat", c.mode), fstat(t, f).Mode&07777, c.want)
	}

	// Root keeps set-group-ID without group execution; owner and
	// group may be set in one chown.
	p := filepath.Join(dir, "rootchown")
	writeFile(t, p, "x")
	check(t, unix.Chmod(p, 02644), "Chmod")
	check(t, os.Chown(p, nobody, nobody), "Chown by root")
	eq(t, "mode 2644 after chown by root", lstat(t, p).Mode&07777, 02644)

	p = filepath.Join(dir, "owned")
	writeFile(t, p, "x")
	check(t, os.Chown(p, nobody, nobody), "Chown")
	check(t, unix.Chmod(p, 06755), "Chmod")
	f := open(t, p, os.O_RDONLY, 0)
	check(t, asUser(nobody, nobody, func() error { return unix.Fchown(int(f.Fd()), -1, nobody) }), "Fchown as owner")
	eq(t, "mode after chown by the owner", lstat(t, p).Mode&07777, 0755)
}

// alignedBuf returns n bytes of fill aligned for O_DIRECT, unmapped
// when the test ends.
func alignedBuf(t *testing.T, n int, fill byte) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	check(t, err, "Mmap")
	t.Cleanup(func() { unix.Munmap(b) })
	for i := range b {
		b[i] = fill
	}
	return b
}

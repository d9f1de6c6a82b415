package posixtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Advisory locks: POSIX record locks, open file description locks and
// flock.

func lk(typ int16, start, length int64) *unix.Flock_t {
	return &unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: length}
}

func fcntlLock(f *os.File, cmd int, l *unix.Flock_t) error {
	return unix.FcntlFlock(f.Fd(), cmd, l)
}

// twoOpens writes a file and opens it twice: two open file descriptions.
func twoOpens(t *testing.T, dir string) (*os.File, *os.File) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, string(make([]byte, 200)))
	return open(t, p, os.O_RDWR, 0), open(t, p, os.O_RDWR, 0)
}

// OFDLock takes open file description locks through two opens of one
// file: overlapping ones conflict, others do not, unlocking and closing
// release them, and a blocked F_OFD_SETLKW wakes on release.
func OFDLock(t *testing.T, dir string) {
	f1, f2 := twoOpens(t, dir)
	check(t, fcntlLock(f1, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 0, 100)), "write lock [0,100)")
	wantErrno(t, fcntlLock(f2, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 50, 10)), unix.EAGAIN, "overlapping write lock")
	wantErrno(t, fcntlLock(f2, unix.F_OFD_SETLK, lk(unix.F_RDLCK, 99, 1)), unix.EAGAIN, "overlapping read lock")
	check(t, fcntlLock(f2, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 100, 50)), "adjacent write lock [100,150)")
	check(t, fcntlLock(f1, unix.F_OFD_SETLK, lk(unix.F_UNLCK, 0, 100)), "unlock")
	check(t, fcntlLock(f2, unix.F_OFD_SETLK, lk(unix.F_RDLCK, 0, 10)), "read lock after unlock")
	check(t, fcntlLock(f1, unix.F_OFD_SETLK, lk(unix.F_RDLCK, 0, 10)), "shared read lock")
	wantErrno(t, fcntlLock(f1, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 0, 10)), unix.EAGAIN, "write lock over a shared one")

	done := make(chan error, 1)
	go func() { done <- fcntlLock(f1, unix.F_OFD_SETLKW, lk(unix.F_WRLCK, 120, 10)) }()
	select {
	case err := <-done:
		t.Fatalf("F_OFD_SETLKW returned %v while the range was locked", err)
	case <-time.After(50 * time.Millisecond):
	}
	check(t, f2.Close(), "Close") // drops f2's locks
	select {
	case err := <-done:
		check(t, err, "F_OFD_SETLKW")
	case <-time.After(10 * time.Second):
		t.Fatalf("F_OFD_SETLKW still blocked after the holder closed")
	}
	check(t, fcntlLock(f1, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 0, 0)), "write lock of the whole file")
}

// GetLk reports the lock that conflicts, with its range, to F_GETLK and
// F_OFD_GETLK; a free range reports F_UNLCK.
func GetLk(t *testing.T, dir string) {
	f1, f2 := twoOpens(t, dir)
	check(t, fcntlLock(f1, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 10, 90)), "write lock [10,100)")
	for _, cmd := range []int{unix.F_OFD_GETLK, unix.F_GETLK} {
		l := lk(unix.F_RDLCK, 0, 20)
		check(t, fcntlLock(f2, cmd, l), "GETLK")
		eq(t, "conflicting type", l.Type, unix.F_WRLCK)
		eq(t, "conflicting start", l.Start, 10)
		eq(t, "conflicting length", l.Len, 90)
		l = lk(unix.F_WRLCK, 100, 0)
		check(t, fcntlLock(f2, cmd, l), "GETLK free range")
		eq(t, "free range type", l.Type, unix.F_UNLCK)
	}
	l := lk(unix.F_WRLCK, 0, 0)
	check(t, fcntlLock(f1, unix.F_OFD_GETLK, l), "GETLK by the holder")
	eq(t, "own lock type", l.Type, unix.F_UNLCK)
}

// GetLkToEOF reports a lock that reaches EOF with length 0.
func GetLkToEOF(t *testing.T, dir string) {
	f1, f2 := twoOpens(t, dir)
	check(t, fcntlLock(f2, unix.F_OFD_SETLK, lk(unix.F_RDLCK, 150, 0)), "read lock [150,EOF)")
	for _, cmd := range []int{unix.F_OFD_GETLK, unix.F_GETLK} {
		l := lk(unix.F_WRLCK, 0, 0)
		check(t, fcntlLock(f1, cmd, l), "GETLK of a read lock to EOF")
		eq(t, "read lock type", l.Type, unix.F_RDLCK)
		eq(t, "read lock start", l.Start, 150)
		eq(t, "read lock length (to EOF)", l.Len, 0)
	}
}

// ProcessLock takes classic POSIX locks through two opens in one
// process: they belong to the process, so they do not conflict with
// each other, they do with an open file description lock, and closing
// either descriptor releases them all.
func ProcessLock(t *testing.T, dir string) {
	f1, f2 := twoOpens(t, dir)
	f3 := open(t, f1.Name(), os.O_RDWR, 0)
	check(t, fcntlLock(f1, unix.F_SETLK, lk(unix.F_WRLCK, 0, 10)), "F_SETLK through f1")
	check(t, fcntlLock(f2, unix.F_SETLK, lk(unix.F_WRLCK, 5, 10)), "F_SETLK through f2, same process")
	l := lk(unix.F_WRLCK, 0, 0)
	check(t, fcntlLock(f2, unix.F_GETLK, l), "F_GETLK of own locks")
	eq(t, "own lock type", l.Type, unix.F_UNLCK)
	wantErrno(t, fcntlLock(f3, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 12, 1)), unix.EAGAIN, "OFD lock over the process's lock")
	l = lk(unix.F_WRLCK, 0, 0)
	check(t, fcntlLock(f3, unix.F_OFD_GETLK, l), "F_OFD_GETLK")
	eq(t, "process lock type", l.Type, unix.F_WRLCK)
	eq(t, "process lock start", l.Start, 0)
	eq(t, "process lock length (merged)", l.Len, 15)
	check(t, f2.Close(), "Close f2")
	check(t, fcntlLock(f3, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 0, 0)), "OFD lock after the process closed a descriptor")
}

// ProcessLockClose checks that closing any descriptor of a file, also
// one no lock was taken through, releases the process's POSIX locks on
// it; and unlocking the whole file does too.
func ProcessLockClose(t *testing.T, dir string) {
	f1, f2 := twoOpens(t, dir)
	f3 := open(t, f1.Name(), os.O_RDWR, 0)
	check(t, fcntlLock(f1, unix.F_SETLK, lk(unix.F_WRLCK, 0, 10)), "F_SETLK")
	wantErrno(t, fcntlLock(f3, unix.F_OFD_SETLK, lk(unix.F_RDLCK, 0, 1)), unix.EAGAIN, "OFD lock over the process's lock")
	check(t, fcntlLock(f1, unix.F_SETLK, lk(unix.F_UNLCK, 0, 0)), "unlock the whole file")
	check(t, fcntlLock(f3, unix.F_OFD_SETLK, lk(unix.F_RDLCK, 0, 1)), "OFD lock after unlocking")
	check(t, fcntlLock(f3, unix.F_OFD_SETLK, lk(unix.F_UNLCK, 0, 1)), "OFD unlock")
	check(t, fcntlLock(f1, unix.F_SETLK, lk(unix.F_WRLCK, 0, 10)), "F_SETLK again")
	check(t, f2.Close(), "Close a descriptor that took no lock")
	check(t, fcntlLock(f3, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 0, 0)), "OFD lock after the close")
}

// Flock takes whole-file flock locks through two opens: exclusive
// conflicts with anything, shared with exclusive only, and close
// releases.
func Flock(t *testing.T, dir string) {
	f1, f2 := twoOpens(t, dir)
	fd1, fd2 := int(f1.Fd()), int(f2.Fd())
	check(t, unix.Flock(fd1, unix.LOCK_EX|unix.LOCK_NB), "LOCK_EX")
	wantErrno(t, unix.Flock(fd2, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK, "second LOCK_EX")
	wantErrno(t, unix.Flock(fd2, unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK, "LOCK_SH over LOCK_EX")
	check(t, unix.Flock(fd1, unix.LOCK_EX|unix.LOCK_NB), "LOCK_EX again by the holder")
	check(t, unix.Flock(fd1, unix.LOCK_UN), "LOCK_UN")
	check(t, unix.Flock(fd2, unix.LOCK_SH|unix.LOCK_NB), "LOCK_SH")
	check(t, unix.Flock(fd1, unix.LOCK_SH|unix.LOCK_NB), "second LOCK_SH")
	wantErrno(t, unix.Flock(fd1, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK, "upgrade to LOCK_EX while shared")
	check(t, unix.Flock(fd1, unix.LOCK_UN), "LOCK_UN")

	done := make(chan error, 1)
	go func() { done <- unix.Flock(fd1, unix.LOCK_EX) }()
	select {
	case err := <-done:
		t.Fatalf("blocking LOCK_EX returned %v while shared", err)
	case <-time.After(50 * time.Millisecond):
	}
	check(t, f2.Close(), "Close") // drops f2's lock
	select {
	case err := <-done:
		check(t, err, "blocking LOCK_EX")
	case <-time.After(10 * time.Second):
		t.Fatalf("blocking LOCK_EX still blocked after the holder closed")
	}
	f3 := open(t, f1.Name(), os.O_RDONLY, 0)
	wantErrno(t, unix.Flock(int(f3.Fd()), unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK, "LOCK_SH by a new open")
}

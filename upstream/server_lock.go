package upstream

import (
	"golang.org/x/sys/unix"
)

// Advisory locks are taken on the host as open file description locks
// (F_OFD_*) or flock on the handle's fd, so guest opens of the same file
// conflict with each other and with host processes. A handle holding
// locks is pinned: closing its fd would drop them.

func (ss *session) getlk(req *LockReq, resp *LockResp) error {
	return ss.withFile(req.Handle, func(_ *openFile, fd int) error {
		fl := flockOf(&req.Lock)
		if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &fl); err != nil {
			return err
		}
		resp.Lock = lockOf(&fl)
		return nil
	})
}

func (ss *session) setlk(req *LockReq, _ *Empty) error {
	f, err := ss.handle(req.Handle)
	if err != nil {
		return err
	}
	if req.Lock.Type != unix.F_UNLCK {
		if err := ss.pin(f); err != nil {
			return err
		}
	}
	return ss.withFile(req.Handle, func(_ *openFile, fd int) error {
		if req.Flock {
			return flockFD(fd, &req.Lock, req.Wait)
		}
		cmd := unix.F_OFD_SETLK
		if req.Wait {
			cmd = unix.F_OFD_SETLKW
		}
		fl := flockOf(&req.Lock)
		return unix.FcntlFlock(uintptr(fd), cmd, &fl)
	})
}

func flockFD(fd int, l *Lock, wait bool) error {
	how := unix.LOCK_UN
	switch l.Type {
	case unix.F_RDLCK:
		how = unix.LOCK_SH
	case unix.F_WRLCK:
		how = unix.LOCK_EX
	}
	if !wait {
		how |= unix.LOCK_NB
	}
	err := unix.Flock(fd, how)
	if err == unix.EWOULDBLOCK {
		return unix.EAGAIN
	}
	return err
}

func flockOf(l *Lock) unix.Flock_t {
	fl := unix.Flock_t{Type: int16(l.Type), Whence: 0, Start: int64(l.Start)}
	if l.End != ^uint64(0) && l.End >= l.Start {
		fl.Len = int64(l.End - l.Start + 1)
	}
	return fl
}

func lockOf(fl *unix.Flock_t) Lock {
	l := Lock{Type: uint32(fl.Type), Start: uint64(fl.Start), End: ^uint64(0), Pid: uint32(max(fl.Pid, 0))}
	if fl.Len > 0 {
		l.End = uint64(fl.Start + fl.Len - 1)
	}
	return l
}

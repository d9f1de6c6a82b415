//go:build linux

package upstream

import (
	"math"

	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// Advisory locks are taken on the host as open file description locks
// (F_OFD_*) or flock, so guest opens of the same file conflict with
// each other and with host processes.
//
// flock locks belong to an open file: they are taken on the handle's fd,
// and a handle holding them is pinned, since closing its fd would drop
// them.
//
// POSIX locks belong to the guest's lock owner (a process's files, or
// an open file for OFD locks), not to a handle: each owner's locks on a
// node are taken on an open file description of its own, so two opens
// by one owner do not conflict and an unlock through either reaches
// them. That fd is closed, dropping the owner's locks, when the owner
// unlocks the whole file (as the guest does at each close), when the
// last handle it locked through is released, or with the node's last
// handle.

// ownerLock is the fd one owner's POSIX locks on a node are taken on.
type ownerLock struct {
	r   *fdRef
	via map[*openFile]bool // handles the owner locked through
}

func (ss *session) getlk(req *LockReq, resp *LockResp) error {
	f, err := ss.handle(req.Handle)
	if err != nil {
		return err
	}
	r, err := ss.ownerFD(f, req.Owner, false)
	if err != nil {
		return err
	}
	if r == nil { // the owner holds no locks: any fd of the file will do
		return ss.withFile(req.Handle, func(_ *openFile, fd int) error {
			return getlkFD(fd, req, resp)
		})
	}
	defer r.release()
	return getlkFD(r.fd, req, resp)
}

func getlkFD(fd int, req *LockReq, resp *LockResp) error {
	fl := flockOf(&req.Lock)
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &fl); err != nil {
		return err
	}
	resp.Lock = lockOf(&fl)
	return nil
}

// setlk takes or drops a lock; a blocking one waits until the lock is
// granted or cancel is closed (lockwait.go).
func (ss *session) setlk(cancel <-chan struct{}, req *LockReq, _ *Empty) error {
	f, err := ss.handle(req.Handle)
	if err != nil {
		return err
	}
	if req.Flock {
		return ss.flock(f, req, cancel)
	}
	unlock := req.Lock.Type == unix.F_UNLCK
	r, err := ss.ownerFD(f, req.Owner, !unlock)
	if err != nil || r == nil { // nil: an unlock by an owner holding nothing
		return err
	}
	defer r.release()
	fl := flockOf(&req.Lock)
	err = takeLock(req.Wait, cancel, func(wait bool) error {
		cmd := unix.F_OFD_SETLK
		if wait {
			cmd = unix.F_OFD_SETLKW
		}
		return unix.FcntlFlock(uintptr(r.fd), cmd, &fl)
	})
	if err != nil {
		return err
	}
	if unlock && fl.Start == 0 && fl.Len == 0 {
		ss.nodes.dropOwner(f.node, req.Owner)
	}
	return nil
}

func (ss *session) flock(f *openFile, req *LockReq, cancel <-chan struct{}) error {
	if req.Lock.Type != unix.F_UNLCK {
		if err := ss.pin(f); err != nil {
			return err
		}
	}
	return ss.withFile(req.Handle, func(_ *openFile, fd int) error {
		return takeLock(req.Wait, cancel, func(wait bool) error { return flockFD(fd, &req.Lock, wait) })
	})
}

// ownerFD returns the fd owner's POSIX locks on f's node are taken on,
// with a reference held. If the owner has none, create opens one (f is
// then a handle it locks through); else ownerFD returns nil.
func (ss *session) ownerFD(f *openFile, owner uint64, create bool) (*fdRef, error) {
	if r := ss.nodes.ownerLock(f, owner, create); r != nil || !create {
		return r, nil
	}
	fd, err := ss.openLockFD(f)
	if err != nil {
		return nil, err
	}
	return ss.nodes.addOwnerLock(f, owner, fd), nil
}

// openLockFD opens f's file again: read-write where allowed, so that
// any lock type can be taken on it, else as f was opened.
func (ss *session) openLockFD(f *openFile) (int, error) {
	r, err := ss.fileFD(f)
	if err != nil {
		return -1, err
	}
	defer r.release()
	fd, err := hostfs.Reopen(r.fd, unix.O_RDWR)
	if err != nil {
		fd, err = hostfs.Reopen(r.fd, f.flags&unix.O_ACCMODE)
	}
	return fd, err
}

// ownerLock returns owner's lock fd on f's node with a reference held,
// or nil; via records f as a handle the owner locks through.
func (t *nodeTable) ownerLock(f *openFile, owner uint64, via bool) *fdRef {
	t.mu.Lock()
	defer t.mu.Unlock()
	ol := f.node.locks[owner]
	if ol == nil {
		return nil
	}
	if via {
		ol.via[f] = true
	}
	ol.r.refs.Add(1)
	return ol.r
}

// addOwnerLock records fd as owner's lock fd on f's node, locking
// through f, and returns it with a reference held. If another fd was
// recorded first, fd is closed and that one returned.
func (t *nodeTable) addOwnerLock(f *openFile, owner uint64, fd int) *fdRef {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := f.node
	ol := n.locks[owner]
	if ol != nil {
		unix.Close(fd)
	} else {
		if n.locks == nil {
			n.locks = map[uint64]*ownerLock{}
		}
		ol = &ownerLock{r: &fdRef{fd: fd}, via: map[*openFile]bool{}}
		ol.r.refs.Store(1)
		n.locks[owner] = ol
	}
	ol.via[f] = true
	ol.r.refs.Add(1)
	return ol.r
}

// dropOwner closes owner's lock fd on n, once no request uses it.
func (t *nodeTable) dropOwner(n *node, owner uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ol := n.locks[owner]; ol != nil {
		delete(n.locks, owner)
		ol.r.release()
	}
}

// releasedLocks forgets f, a handle being released, as one that owners
// lock through; the owners left with none lose their locks.
func (t *nodeTable) releasedLocks(f *openFile) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for owner, ol := range f.node.locks {
		delete(ol.via, f)
		if len(ol.via) == 0 {
			delete(f.node.locks, owner)
			ol.r.release()
		}
	}
}

// dropLocksLocked closes every owner's lock fd on n. Needs mu.
func (t *nodeTable) dropLocksLocked(n *node) {
	for _, ol := range n.locks {
		ol.r.release()
	}
	n.locks = nil
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

// flockOf converts a lock range. An End of ^0, or of OFFSET_MAX as the
// guest kernel says it, reaches EOF: a length of 0.
func flockOf(l *Lock) unix.Flock_t {
	fl := unix.Flock_t{Type: int16(l.Type), Whence: 0, Start: int64(l.Start)}
	if l.End < math.MaxInt64 && l.End >= l.Start {
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

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// A caller sends one request of its op per call of do (i counts the
// calls).
type caller interface {
	do(i int) error
	close()
}

// An opFunc makes the caller of an op on dir; own says dir is the root
// of the rttFS this command mounted.
type opFunc func(dir string, own bool) (caller, error)

var ops = map[string]opFunc{
	"getxattr": func(dir string, _ bool) (caller, error) { return getxattrCall(dir), nil },
	"getattr":  func(dir string, _ bool) (caller, error) { return getattrCall(dir), nil },
	"lookup":   newLookupCall,
	"relookup": newRelookupCall,
	"read":     newReadCall,
}

type getxattrCall string

func (c getxattrCall) do(int) error {
	var buf [64]byte
	if _, err := unix.Getxattr(string(c), "user.fuse-rtt", buf[:]); err != nil && !errors.Is(err, unix.ENODATA) {
		return fmt.Errorf("getxattr: %w", err)
	}
	return nil
}

func (getxattrCall) close() {}

type getattrCall string

func (c getattrCall) do(int) error {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, string(c), unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, &st); err != nil {
		return fmt.Errorf("statx: %w", err)
	}
	return nil
}

func (getattrCall) close() {}

// lookupCall looks up names no earlier run used: the kernel may keep
// a missing name (a negative entry) and not ask again.
type lookupCall struct{ prefix string }

func newLookupCall(dir string, _ bool) (caller, error) {
	return lookupCall{filepath.Join(dir, fmt.Sprintf("rtt-missing-%d-%d-", os.Getpid(), time.Now().UnixNano()))}, nil
}

func (c lookupCall) do(i int) error {
	var st unix.Stat_t
	if err := unix.Lstat(c.prefix+strconv.Itoa(i), &st); !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("lstat of a missing name: %v, want ENOENT", err)
	}
	return nil
}

func (lookupCall) close() {}

// relookupCall looks up names the file system has, each once, that the
// kernel does not know: on an rttFS, new names it answers for (see
// rttFS.Lookup); elsewhere the names of DIR, after the kernel dropped
// its dentries (drop_caches; root), which cachefs answers from the
// listing it cached. Each is an fstatat of the name in DIR open, so
// that the path walked is one component on either mount.
type relookupCall struct {
	dir   string
	fd    int      // DIR, opened after the dentries were dropped
	names []string // nil: an rttFS's names
}

func newRelookupCall(dir string, own bool) (caller, error) {
	c := &relookupCall{dir: dir}
	if !own {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			c.names = append(c.names, e.Name())
		}
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			return nil, fmt.Errorf("dropping the kernel's dentries: %w", err)
		}
		time.Sleep(2 * time.Second) // the FORGETs of the dropped inodes reach the daemon
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	c.fd = fd
	return c, nil
}

func (c *relookupCall) do(i int) error {
	name := rttName(i)
	if c.names != nil {
		if i >= len(c.names) {
			return fmt.Errorf("%s has %d names: -n at most that", c.dir, len(c.names))
		}
		name = c.names[i]
	}
	var st unix.Stat_t
	if err := unix.Fstatat(c.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("fstatat %s: %w", filepath.Join(c.dir, name), err)
	}
	return nil
}

func (c *relookupCall) close() { unix.Close(c.fd) }

// readCall reads rttFileSize bytes of DIR/rtt-file at offset 0, its
// pages dropped first so that each read is a READ.
type readCall struct {
	f   *os.File
	buf []byte
}

func newReadCall(dir string, _ bool) (caller, error) {
	f, err := os.Open(filepath.Join(dir, rttFile))
	if err != nil {
		return nil, err
	}
	return &readCall{f: f, buf: make([]byte, rttFileSize)}, nil
}

func (c *readCall) do(int) error {
	if err := unix.Fadvise(int(c.f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("fadvise: %w", err)
	}
	if n, err := unix.Pread(int(c.f.Fd()), c.buf, 0); n != len(c.buf) {
		return fmt.Errorf("read %d bytes (%v), want %d", n, err, len(c.buf))
	}
	return nil
}

func (c *readCall) close() { c.f.Close() }

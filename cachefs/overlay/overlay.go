package overlay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Config describes one overlay. The zero value of each field but Dir,
// Lower, Target and Send is a working default.
type Config struct {
	// Dir holds the overlay's state on the guest's disk: upper, work,
	// the host state file and the subtree's path (prefix).
	Dir    string
	Lower  string // the lower layer: a cached view of the subtree
	Target string // where to mount it
	Prefix string // the subtree's path relative to the export root
	Send   Sender
	Gather time.Duration                    // Options.Gather
	Logf   func(format string, args ...any) // nil: log.Printf
}

// OrphanPrefix starts the names of overlay directories kept because the
// host did not take them whole; Leftovers lists them.
const OrphanPrefix = ".orphan-"

// Files of an overlay's Dir.
const (
	upperName  = "upper"
	workName   = "work"
	stateName  = "state"
	prefixName = "prefix"
)

// Overlay is a mounted overlay and its write-back.
type Overlay struct {
	c   Config  // immutable
	eng *Engine // immutable
	mnt mountID // immutable: the overlay's mount at c.Target
}

// mountID names one mount: its id, which a later mount may take once it
// is gone, and its device.
type mountID struct {
	id         uint64
	major, min uint32
}

// mountAt returns the mount at path.
func mountAt(path string) (mountID, error) {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st)
	return mountID{st.Mnt_id, st.Dev_major, st.Dev_minor}, err
}

// unmount unmounts the overlay (Unmount) if it is still the mount at
// Target: an outside umount may have taken it away, and what is at
// Target then is another mount, the one the overlay covered.
func (o *Overlay) unmount() (detached bool, err error) {
	if m, err := mountAt(o.c.Target); err != nil || m != o.mnt {
		return false, nil
	}
	return Unmount(o.c.Target)
}

// Open mounts an overlay on a fresh Dir and starts its write-back.
func Open(c Config) (*Overlay, error) {
	upper, work := filepath.Join(c.Dir, upperName), filepath.Join(c.Dir, workName)
	if err := prepare(c, upper, work); err != nil {
		return nil, err
	}
	if err := Mount(Layers{Lower: c.Lower, Upper: upper, Work: work, Target: c.Target}); err != nil {
		return nil, fmt.Errorf("mounting an overlay on %s: %w", c.Target, err)
	}
	mnt, err := mountAt(c.Target)
	if err != nil {
		unix.Unmount(c.Target, unix.MNT_DETACH)
		return nil, err
	}
	eng, err := Start(c.options(true))
	if err != nil {
		unix.Unmount(c.Target, unix.MNT_DETACH)
		return nil, err
	}
	return &Overlay{c: c, eng: eng, mnt: mnt}, nil
}

// prepare makes Dir: the upper root takes the lower root's mode, owner
// and times (the overlay's root shows the upper's), and the prefix is
// kept for a recovery after a crash.
func prepare(c Config, upper, work string) error {
	var st unix.Stat_t
	if err := unix.Stat(c.Lower, &st); err != nil {
		return err
	}
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(c.Dir, prefixName), []byte(c.Prefix), 0o600); err != nil {
		return err
	}
	if err := syncDir(c.Dir); err != nil {
		return err
	}
	if err := unix.Chown(upper, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := unix.Chmod(upper, st.Mode&07777); err != nil {
		return err
	}
	return unix.UtimesNano(upper, []unix.Timespec{st.Atim, st.Mtim})
}

func (c Config) options(watch bool) Options {
	return Options{Upper: filepath.Join(c.Dir, upperName), State: filepath.Join(c.Dir, stateName),
		Prefix: c.Prefix, Send: c.Send, Watch: watch, Gather: c.Gather, Logf: c.Logf}
}

// Flush returns once everything under path (relative to the subtree)
// is on the host, with the changes the host refused.
func (o *Overlay) Flush(ctx context.Context, path string) ([]Failure, error) {
	return o.eng.Flush(ctx, path)
}

// Changed reports whether the guest changed rel (relative to the
// subtree): the upper directory has it.
func (o *Overlay) Changed(rel string) bool {
	var st unix.Stat_t
	return lstatAt(filepath.Join(o.c.Dir, upperName), rel, &st) == nil
}

// Stats returns the write-back's counters.
func (o *Overlay) Stats() Stats { return o.eng.Stats() }

// Close writes everything back, unmounts the overlay and writes back
// what came in between; then, if the host has it all, it removes Dir.
// If the overlay is busy it is detached: its open files may still
// change the upper directory, so Dir is kept, for Recover.
func (o *Overlay) Close(ctx context.Context) ([]Failure, error) {
	defer o.eng.Close()
	if _, err := o.eng.Flush(ctx, ""); err != nil {
		return nil, err
	}
	detached, err := o.unmount()
	if err != nil {
		return nil, fmt.Errorf("unmounting %s: %w", o.c.Target, err)
	}
	failed, err := o.eng.Flush(ctx, "")
	o.eng.Close()
	if err != nil || len(failed) > 0 || detached {
		return failed, err
	}
	return nil, os.RemoveAll(o.c.Dir)
}

// Abandon unmounts the overlay and stops its write-back without
// flushing, as a killed daemon would leave it; Dir stays for Recover.
func (o *Overlay) Abandon() {
	o.eng.Close()
	if m, err := mountAt(o.c.Target); err == nil && m == o.mnt {
		unix.Unmount(o.c.Target, unix.MNT_DETACH)
	}
}

// Recover writes back the upper directory of an overlay a previous
// daemon left in dir (a killed daemon's, whose fsyncs made it durable),
// detaching the overlay first if it is still mounted; dir is removed
// once the host has everything. It returns the subtree's prefix.
func Recover(ctx context.Context, dir string, send Sender, logf func(string, ...any)) (string, []Failure, error) {
	b, err := os.ReadFile(filepath.Join(dir, prefixName))
	if err != nil {
		return "", nil, err
	}
	c := Config{Dir: dir, Prefix: string(b), Send: send, Logf: logf}
	unmountStale(filepath.Join(dir, upperName))
	eng, err := Start(c.options(false))
	if err != nil {
		return c.Prefix, nil, err
	}
	failed, err := eng.Flush(ctx, "")
	eng.Close()
	if err == nil && len(failed) == 0 {
		err = os.RemoveAll(dir)
	}
	return c.Prefix, failed, err
}

// Leftovers returns the overlay directories under root: those named by
// their registration, and the orphans (".orphan-*") a daemon kept; not
// other dot names, such as Probe's.
func Leftovers(root string) ([]string, error) {
	des, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var out []string
	for _, de := range des {
		if n := de.Name(); de.IsDir() && (!strings.HasPrefix(n, ".") || strings.HasPrefix(n, OrphanPrefix)) {
			out = append(out, filepath.Join(root, de.Name()))
		}
	}
	return out, err
}

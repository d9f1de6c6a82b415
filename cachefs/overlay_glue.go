package cachefs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cachefs/cachefs/cachefs/overlay"
	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/upstream"
)

// Delegated registrations as overlays (Options.Overlays, package
// overlay): the subtree is registered cached, so that the mount shows a
// cached view of it, and an overlay is mounted over that view at the
// subtree's own path, with its upper and work directories under
// <StateDir>/overlay/<id>. The container's changes land in the upper
// directory on the guest's disk; package overlay writes them back
// through OpApply. Names the write-back moves or removes on the host
// stay in the view for the overlay (overlay_lower.go).

// overlays are the FS's overlay registrations, and the overlay
// directories a previous daemon left, which are written back even where
// no overlay can be mounted now.
type overlays struct {
	dir    string        // immutable: <StateDir>/overlay
	off    string        // immutable: why no overlay is mounted, or ""
	gather time.Duration // tests: overlay.Config.Gather

	// regMu serializes registering and unregistering overlays (mounts
	// and unmounts); taken before mu.
	regMu sync.Mutex

	mu       sync.Mutex // protects the following
	byID     map[uint64]*ovlReg
	byPath   map[string]*ovlReg
	orphans  []string // overlay directories left by a daemon, not yet all on the host
	fellBack string   // the last registration that could not be an overlay, and why
	kept     keptNames
}

// ovlReg is one overlay: the delegated registrations of a path.
type ovlReg struct {
	id        uint64 // the policy's (cached) registration; immutable
	path      string // immutable
	ov        *overlay.Overlay
	refs      int           // overlays.mu
	conflicts atomic.Uint64 // host changes to what the guest changed
}

// startOverlays writes back the overlays a previous daemon left, then
// turns overlays on where Options.Overlays asks for them and they can
// be mounted: else delegated registrations stay FUSE's, and the reason
// is logged once and kept for Stats.OverlaysOff.
func (fs *FS) startOverlays() error {
	switch {
	case fs.opts.StateDir == "":
		fs.ovlOff = "no state directory"
	case !fs.up.Has(upstream.FeatTreeWB):
		fs.ovlOff = "the host lacks FeatTreeWB (an older cachefsd serve)"
	}
	if fs.ovlOff != "" {
		if fs.opts.Overlays {
			fs.opts.Logf("cachefs: delegated subtrees stay FUSE, not overlays: %s", fs.ovlOff)
		} else {
			fs.ovlOff = overlaysTurnedOff
		}
		return nil
	}
	// Absolute: overlayfs keeps upperdir as given, and a restarted
	// daemon finds its stale overlays by it in mountinfo.
	dir, err := filepath.Abs(filepath.Join(fs.opts.StateDir, "overlay"))
	if err != nil {
		return err
	}
	o := &overlays{dir: dir, byID: map[uint64]*ovlReg{}, byPath: map[string]*ovlReg{}}
	switch {
	case !fs.opts.Overlays:
		o.off = overlaysTurnedOff
	default:
		if err := overlay.Probe(filepath.Join(o.dir, ".probe")); err != nil {
			o.off = err.Error()
			fs.opts.Logf("cachefs: delegated subtrees stay FUSE, not overlays: %s", o.off)
		}
	}
	if o.off == "" {
		if err := os.MkdirAll(o.dir, 0o700); err != nil {
			return err
		}
	}
	o.kept.init()
	fs.ovl = o
	fs.recoverOverlays()
	return nil
}

// overlaysTurnedOff is Stats.OverlaysOff without Options.Overlays.
const overlaysTurnedOff = "turned off (Options.Overlays, cachefsd's --overlay=false)"

// overlaysOff returns why delegated registrations are FUSE's: why no
// overlay is mounted, or the last registration that fell back.
func (fs *FS) overlaysOff() string {
	if fs.ovl == nil {
		return fs.ovlOff
	}
	if fs.ovl.off != "" {
		return fs.ovl.off
	}
	fs.ovl.mu.Lock()
	defer fs.ovl.mu.Unlock()
	return fs.ovl.fellBack
}

// recoverOverlays writes back the upper directories in the state
// directory; those the host does not take whole are kept as orphans,
// tried again at each flush.
func (fs *FS) recoverOverlays() {
	dirs, err := overlay.Leftovers(fs.ovl.dir)
	if err != nil {
		fs.opts.Logf("cachefs: overlays in %s: %v", fs.ovl.dir, err)
	}
	for i, d := range dirs {
		prefix, failed, err := overlay.Recover(context.Background(), d, fs.overlaySend, fs.opts.Logf)
		if err == nil && len(failed) == 0 {
			continue
		}
		fs.opts.Logf("cachefs: the overlay of %q left by a previous daemon is not all on the host: %v %+v", prefix, err, failed)
		orphan := filepath.Join(fs.ovl.dir, overlay.OrphanPrefix+strconv.Itoa(i))
		if !strings.HasPrefix(filepath.Base(d), overlay.OrphanPrefix) && os.Rename(d, orphan) == nil {
			d = orphan
		}
		fs.ovl.orphans = append(fs.ovl.orphans, d)
	}
}

// overlaySend is the overlays' sender: the names its ops move or remove
// are kept in the lower view first.
func (fs *FS) overlaySend(ctx context.Context, ops []upstream.WBOp) ([]uint32, error) {
	fs.keepLowerNames(ops)
	var resp upstream.ApplyResp
	err := fs.up.Call(ctx, upstream.OpApply, &upstream.ApplyReq{Ops: ops}, &resp)
	return resp.Errnos, err
}

// registerOverlay registers path as an overlay if m is delegated and
// overlays are on. It reports false otherwise, or if the overlay could
// not be mounted: the caller registers path itself (FUSE delegated).
func (fs *FS) registerOverlay(path string, m consistency.Mode) (uint64, bool) {
	o := fs.ovl
	if o == nil || o.off != "" || m != consistency.Delegated {
		return 0, false
	}
	path = consistency.Clean(path)
	o.regMu.Lock()
	defer o.regMu.Unlock()
	o.mu.Lock()
	if r := o.byPath[path]; r != nil {
		r.refs++
		o.mu.Unlock()
		return fs.policy.Register(path, consistency.Cached), true
	}
	o.mu.Unlock()
	if fs.opts.Mountpoint == "" {
		o.fallBack(path, "no mountpoint")
		return 0, false
	}
	id := fs.Register(path, consistency.Cached)
	ov, err := fs.openOverlay(id, path)
	if err != nil {
		fs.opts.Logf("cachefs: %q stays FUSE delegated: %v", path, err)
		o.fallBack(path, err.Error())
		fs.Unregister(id)
		return 0, false
	}
	r := &ovlReg{id: id, path: path, ov: ov, refs: 1}
	o.mu.Lock()
	o.byID[id], o.byPath[path] = r, r
	o.mu.Unlock()
	return id, true
}

// fallBack notes that path is FUSE delegated, not an overlay, and why.
func (o *overlays) fallBack(path, why string) {
	o.mu.Lock()
	o.fellBack = fmt.Sprintf("%q: %s", "/"+path, why)
	o.mu.Unlock()
}

// openOverlay mounts the overlay of registration id on its lower view.
func (fs *FS) openOverlay(id uint64, path string) (*overlay.Overlay, error) {
	dir := filepath.Join(fs.ovl.dir, strconv.FormatUint(id, 10))
	if _, err := os.Stat(dir); err == nil { // a closed overlay's, not all on the host
		orphan := filepath.Join(fs.ovl.dir, fmt.Sprintf("%s%d-%d", overlay.OrphanPrefix, id, len(fs.ovl.orphans)))
		if err := os.Rename(dir, orphan); err != nil {
			return nil, err
		}
		fs.ovl.mu.Lock()
		fs.ovl.orphans = append(fs.ovl.orphans, orphan)
		fs.ovl.mu.Unlock()
	}
	target := filepath.Join(fs.opts.Mountpoint, path)
	return overlay.Open(overlay.Config{Dir: dir, Lower: target, Target: target, Prefix: path,
		Send: fs.overlaySend, Gather: fs.ovl.gather, Logf: fs.opts.Logf})
}

// unregisterOverlay drops a delegated registration served by an
// overlay; the last of a path writes it back, unmounts it and removes
// its directories. It reports false if id is not an overlay's.
func (fs *FS) unregisterOverlay(id uint64) (bool, error) {
	o := fs.ovl
	if o == nil || !o.has(id) {
		return false, nil
	}
	o.regMu.Lock()
	defer o.regMu.Unlock()
	o.mu.Lock()
	r := o.byID[id]
	if r == nil {
		o.mu.Unlock()
		return false, nil
	}
	r.refs--
	last := r.refs == 0
	if last {
		delete(o.byID, id)
		delete(o.byPath, r.path)
	}
	o.mu.Unlock()
	var err error
	if last {
		err = fs.closeOverlay(r)
	}
	if _, gone, _ := fs.policy.Unregister(id); gone {
		fs.unwatchRegistration(id)
	}
	fs.invalidateAll()
	return true, err
}

// has reports whether id is an overlay's registration.
func (o *overlays) has(id uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byID[id] != nil
}

// closeOverlay writes an overlay back, unmounts it and forgets the
// names kept for it.
func (fs *FS) closeOverlay(r *ovlReg) error {
	failed, err := r.ov.Close(context.Background())
	fs.releaseKept(r.path)
	if err == nil && len(failed) > 0 {
		f := failed[0]
		err = fmt.Errorf("%d changes of %q could not be written back, first: %s %s: %v",
			len(failed), r.path, f.Op, filepath.Join(r.path, f.Path), f.Errno)
	}
	return err
}

// flushOverlays writes every overlay back, and the orphans.
func (fs *FS) flushOverlays() []Failure {
	if fs.ovl == nil {
		return nil
	}
	o := fs.ovl
	o.mu.Lock()
	regs := make([]*ovlReg, 0, len(o.byID))
	for _, r := range o.byID {
		regs = append(regs, r)
	}
	orphans := o.orphans
	o.orphans = nil
	o.mu.Unlock()
	var out []Failure
	for _, r := range regs {
		failed, err := r.ov.Flush(context.Background(), "")
		out = append(out, overlayFailures(r.path, failed, err)...)
	}
	for _, d := range orphans {
		prefix, failed, err := overlay.Recover(context.Background(), d, fs.overlaySend, fs.opts.Logf)
		if err != nil || len(failed) > 0 {
			out = append(out, overlayFailures(prefix, failed, err)...)
			o.mu.Lock()
			o.orphans = append(o.orphans, d)
			o.mu.Unlock()
		}
	}
	return out
}

// overlayFailures turns an overlay's failures into the FS's.
func overlayFailures(prefix string, failed []overlay.Failure, err error) []Failure {
	var out []Failure
	for _, f := range failed {
		out = append(out, Failure{Path: filepath.Join(prefix, f.Path), Op: f.Op, Errno: f.Errno.Error()})
	}
	if err != nil {
		out = append(out, Failure{Path: prefix, Op: "flush", Errno: err.Error()})
	}
	return out
}

// CloseOverlays writes every overlay back and unmounts it, before the
// mount below them goes; the policy's registrations stay.
func (fs *FS) CloseOverlays() error {
	if fs.ovl == nil {
		return nil
	}
	o := fs.ovl
	o.regMu.Lock()
	defer o.regMu.Unlock()
	o.mu.Lock()
	regs := o.byID
	o.byID, o.byPath = map[uint64]*ovlReg{}, map[string]*ovlReg{}
	o.mu.Unlock()
	var first error
	for _, r := range regs {
		if err := fs.closeOverlay(r); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// overlayMountNames returns the names the kernel must keep for the
// overlays: the components of each overlay's path. Invalidating one
// (NOTIFY_INVAL_ENTRY, d_invalidate in the kernel) would detach the
// overlays mounted beneath it.
func (fs *FS) overlayMountNames() map[kernelName]bool {
	if fs.ovl == nil {
		return nil
	}
	fs.ovl.mu.Lock()
	paths := make([]string, 0, len(fs.ovl.byPath))
	for p := range fs.ovl.byPath {
		paths = append(paths, p)
	}
	fs.ovl.mu.Unlock()
	out := map[kernelName]bool{}
	for _, p := range paths {
		n := fs.nodes.get(rootID)
		for _, name := range strings.Split(p, "/") {
			if n == nil || name == "" {
				break
			}
			out[kernelName{n.id, name}] = true
			n = fs.nodes.child(n, name)
		}
	}
	return out
}

// OverlayStats are one overlay's counters.
type OverlayStats struct {
	Path string
	// Conflicts counts host changes to files the guest changed: the
	// guest's version wins, its next write-back replaces the host's.
	Conflicts uint64
	overlay.Stats
}

// overlayStats returns the overlays' counters.
func (fs *FS) overlayStats() []OverlayStats {
	if fs.ovl == nil {
		return nil
	}
	fs.ovl.mu.Lock()
	defer fs.ovl.mu.Unlock()
	var out []OverlayStats
	for _, r := range fs.ovl.byID {
		out = append(out, OverlayStats{Path: r.path, Conflicts: r.conflicts.Load(), Stats: r.ov.Stats()})
	}
	return out
}

// overlayConflict counts a host event on a path an overlay's guest
// changed (the upper directory has it). The host's own write-back
// raises no event.
func (fs *FS) overlayConflict(e *upstream.Event, epoch uint64) {
	if fs.ovl == nil {
		return
	}
	n, name := fs.nodes.byHost(e.Node, epoch), ""
	if e.Kind == upstream.EvEntry {
		n, name = fs.nodes.byHost(e.Parent, epoch), e.Name
	}
	if n == nil {
		return
	}
	p, ok := fs.nodes.path(n)
	if !ok {
		return
	}
	if name != "" {
		p = strings.TrimPrefix(p+"/"+name, "/")
	}
	fs.ovl.mu.Lock()
	defer fs.ovl.mu.Unlock()
	for _, r := range fs.ovl.byID {
		rel, ok := strings.CutPrefix(p, r.path)
		if r.path != "" {
			rel, ok = strings.CutPrefix(rel, "/")
		}
		if ok && rel != "" && r.ov.Changed(rel) {
			r.conflicts.Add(1)
		}
	}
}

// overlayCovers reports whether the path p through the mount is an
// overlay's or lies under one. The actuator leaves such paths alone: a
// syscall there reaches the overlay, whose upper directory it would
// change (a truncate to the host's size, a whiteout for an unlink), and
// inotify watchers of an overlay get no events of its lower layer.
func (fs *FS) overlayCovers(p string) bool {
	if fs.ovl == nil {
		return false
	}
	rel, err := filepath.Rel(fs.opts.Mountpoint, p)
	if err != nil {
		return false
	}
	rel = consistency.Clean(rel)
	fs.ovl.mu.Lock()
	defer fs.ovl.mu.Unlock()
	for path := range fs.ovl.byPath {
		if path == "" || rel == path || strings.HasPrefix(rel, path+"/") {
			return true
		}
	}
	return false
}

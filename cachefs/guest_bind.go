package cachefs

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cachefs/cachefs/consistency"
	"golang.org/x/sys/unix"
)

// Binds. A registration served by a connection of its mode is a clone of
// that connection's mount at the subtree (open_tree(OPEN_TREE_CLONE) of
// a descriptor of it), attached on the mountpoint's path (move_mount).
// Sources are found from each connection's root descriptor without
// crossing mounts (RESOLVE_NO_XDEV), so a bind already in place never
// becomes the source of another.
//
// The binds on the mountpoint always form a stack that can be taken
// down from the top: a deeper path's bind lies on top of a shallower
// one's, and at one path a later registration's on top of an earlier
// one's. Any change at path P takes down the binds at and under P,
// deepest first, and puts back those still registered in that order:
// none is ever hidden under another where it could not be detached.
// Binds are detached lazily (MNT_DETACH): a process or a container's
// bind mount using one keeps it, with the mode it had.

// bound is one bind made on the mountpoint.
type bound struct {
	reg consistency.Registration
}

// rebuild takes down the binds at and under path and makes those of the
// current registrations there again. Needs g.mu.
func (g *Guest) rebuild(path string) error {
	g.detach(path)
	var todo []consistency.Registration
	for _, r := range g.regs.List() {
		if under(r.Path, path) && g.bindsMode(r.Mode) {
			todo = append(todo, r)
		}
	}
	slices.SortStableFunc(todo, func(a, b consistency.Registration) int {
		if d := depth(a.Path) - depth(b.Path); d != 0 {
			return d
		}
		return int(a.ID) - int(b.ID)
	})
	var first error
	for _, r := range todo {
		if err := g.bind(r); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// detach takes down the binds at and under path, top first. Needs g.mu.
func (g *Guest) detach(path string) {
	for i := len(g.applied) - 1; i >= 0; i-- {
		b := g.applied[i]
		if !under(b.reg.Path, path) {
			continue
		}
		if err := unix.Unmount(g.target(b.reg.Path), unix.MNT_DETACH); err != nil {
			g.main.opts.Logf("cachefs: detaching the %s view of %q: %v", b.reg.Mode, b.reg.Path, err)
		}
		g.applied = slices.Delete(g.applied, i, i+1)
	}
}

// bind attaches registration r's view on the mountpoint. Needs g.mu.
func (g *Guest) bind(r consistency.Registration) error {
	root, err := g.sourceRoot(r.Mode)
	if err != nil {
		return err
	}
	src, err := openBeneath(root, r.Path)
	if err != nil {
		return fmt.Errorf("%s view of %q: %w", r.Mode, r.Path, err)
	}
	defer unix.Close(src)
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("%s view of %q: open_tree: %w", r.Mode, r.Path, err)
	}
	defer unix.Close(tree)
	target := g.target(r.Path)
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("%s view of %q: attaching on %s: %w", r.Mode, r.Path, target, err)
	}
	g.applied = append(g.applied, bound{reg: r})
	return nil
}

// sourceRoot returns the root descriptor of mode m's connection.
func (g *Guest) sourceRoot(m consistency.Mode) (int, error) {
	if m != consistency.Cached {
		return g.mainRoot, nil
	}
	c, err := g.cachedConnLocked()
	if err != nil {
		return -1, err
	}
	return c.root, nil
}

func (g *Guest) target(path string) string { return filepath.Join(g.mnt, path) }

// openBeneath opens the directory path under root, never leaving root's
// mount nor following a symlink.
func openBeneath(root int, path string) (int, error) {
	if path == "" {
		path = "."
	}
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH}
	return unix.Openat2(root, path, how)
}

// under reports whether p is at or under dir (clean paths, "" the root).
func under(p, dir string) bool {
	return dir == "" || p == dir || strings.HasPrefix(p, dir+"/")
}

func depth(p string) int {
	if p == "" {
		return 0
	}
	return strings.Count(p, "/") + 1
}

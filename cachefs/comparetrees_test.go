package cachefs_test

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// CompareTrees compares the tree under guestDir (through the mount) with
// the host's copy under hostDir and returns every difference, one line
// each: entries missing on either side, and per entry its type and
// mode, owner, size, contents (read in pieces, never whole), symlink
// target, modification time, link count, and allocated blocks within
// reason (blocksSlack either way: file systems allocate differently,
// but a sparse file must not lose its holes).
func CompareTrees(guestDir, hostDir string) ([]string, error) {
	guest, err := treeStats(guestDir)
	if err != nil {
		return nil, fmt.Errorf("guest: %w", err)
	}
	host, err := treeStats(hostDir)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	var diffs []string
	for rel, g := range guest {
		h, ok := host[rel]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing on the host", rel))
			continue
		}
		for _, d := range compareEntry(&g, &h) {
			diffs = append(diffs, fmt.Sprintf("%s (%s): %s", rel, typeName(g.Mode), d))
		}
		if g.Mode&unix.S_IFMT == unix.S_IFREG && h.Mode&unix.S_IFMT == unix.S_IFREG && g.Size == h.Size {
			if off, err := sameFiles(filepath.Join(guestDir, rel), filepath.Join(hostDir, rel)); err != nil {
				diffs = append(diffs, fmt.Sprintf("%s: contents: %v", rel, err))
			} else if off >= 0 {
				diffs = append(diffs, fmt.Sprintf("%s: contents differ at byte %d", rel, off))
			}
		}
	}
	for rel := range host {
		if _, ok := guest[rel]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: on the host only", rel))
		}
	}
	slices.Sort(diffs)
	return diffs, nil
}

// blocksSlack is how many more 512-byte blocks one side may allocate
// for a file than the other: 256 KiB, beyond a file system's
// preallocation for a small file.
const blocksSlack = 512

// treeEntry is what CompareTrees looks at of one path, besides contents.
type treeEntry struct {
	unix.Stat_t
	target string // symlinks
}

// treeStats lstats every path under root, by path relative to it.
func treeStats(root string) (map[string]treeEntry, error) {
	out := map[string]treeEntry{}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var e treeEntry
		if err := unix.Lstat(p, &e.Stat_t); err != nil {
			return err
		}
		if e.Mode&unix.S_IFMT == unix.S_IFLNK {
			if e.target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		out[rel] = e
		return nil
	})
	return out, err
}

// compareEntry lists how h differs from g, leaving contents aside.
func compareEntry(g, h *treeEntry) []string {
	var d []string
	diff := func(what string, gv, hv any) {
		if gv != hv {
			d = append(d, fmt.Sprintf("%s %v in the guest, %v on the host", what, gv, hv))
		}
	}
	diff("mode", fmt.Sprintf("%o", g.Mode), fmt.Sprintf("%o", h.Mode))
	diff("uid", g.Uid, h.Uid)
	diff("gid", g.Gid, h.Gid)
	if g.Mode&unix.S_IFMT != unix.S_IFDIR || g.Nlink != 1 {
		diff("link count", g.Nlink, h.Nlink) // 1: overlayfs's merged directory, count unknown (as find takes it)
	}
	diff("mtime", unix.TimespecToNsec(g.Mtim), unix.TimespecToNsec(h.Mtim))
	switch g.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		diff("size", g.Size, h.Size)
		if g.Blocks > h.Blocks+blocksSlack || h.Blocks > g.Blocks+blocksSlack {
			d = append(d, fmt.Sprintf("%d blocks allocated in the guest, %d on the host", g.Blocks, h.Blocks))
		}
	case unix.S_IFLNK:
		diff("symlink target", g.target, h.target)
	}
	return d
}

// sameFiles compares two files in pieces and returns the first offset
// where they differ, or -1.
func sameFiles(a, b string) (int64, error) {
	fa, err := os.Open(a)
	if err != nil {
		return 0, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return 0, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 256<<10), make([]byte, 256<<10)
	for off := int64(0); ; {
		na, erra := io.ReadFull(fa, ba)
		nb, errb := io.ReadFull(fb, bb)
		if i := firstDiff(ba[:na], bb[:nb]); i >= 0 {
			return off + int64(i), nil
		}
		off += int64(na)
		if erra != nil || errb != nil {
			if erra == io.EOF || erra == io.ErrUnexpectedEOF {
				return -1, nil
			}
			return 0, fmt.Errorf("%v / %v", erra, errb)
		}
	}
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	}
	return fmt.Sprintf("type %o", mode&unix.S_IFMT)
}

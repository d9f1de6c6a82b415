//go:build linux

package upstream

import (
	"github.com/cachefs/cachefs/upstream/hostfs"
	"golang.org/x/sys/unix"
)

// ReadTree serves a guest prefetching a subtree's metadata for a tree
// walk: one round trip returns the listings of many directories, each
// entry with its attributes, where a walk would need several round trips
// per directory.

// maxTreeEntries bounds one ReadTree reply (about 150 bytes an entry).
const maxTreeEntries = 16384

func (ss *session) readTree(req *TreeReq, resp *TreeResp) error {
	budget := int(min(max(req.MaxEntries, 1), maxTreeEntries))
	root, err := ss.nodes.get(req.Node)
	if err != nil {
		return err
	}
	queue := []*node{root}
	bytes := 0 // estimated reply size, kept well under MaxFrame
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		ents, ok, err := ss.listWhole(dir, budget)
		if err != nil && dir == root {
			return err
		}
		if !ok {
			resp.Truncated = true
			break
		}
		budget -= len(ents)
		for _, e := range ents {
			bytes += 160 + len(e.Name)
		}
		resp.Dirs = append(resp.Dirs, TreeDir{Node: dir.id, Entries: ents})
		if bytes > MaxFrame/2 {
			resp.Truncated = len(queue) > 0
			break
		}
		for _, e := range ents {
			if e.Entry.Node != 0 && e.Mode&unix.S_IFMT == unix.S_IFDIR {
				if n, err := ss.nodes.get(e.Entry.Node); err == nil {
					queue = append(queue, n)
				}
			}
		}
	}
	return nil
}

// listWhole reads all of dir with attributes if it has at most limit
// entries; ok is false if it has more, and then no reference is taken.
func (ss *session) listWhole(dir *node, limit int) ([]Dirent, bool, error) {
	r, err := ss.nodeFD(dir)
	if err != nil {
		return nil, false, err
	}
	defer r.release()
	dfd, err := hostfs.Reopen(r.fd, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(dfd)
	ents, _, _, err := readDirents(dfd, 0, limit+1) // names only: no references yet
	if err != nil || len(ents) > limit {
		return nil, false, err
	}
	return ss.plus(dir, dfd, ents), true, nil
}

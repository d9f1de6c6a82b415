package overlay

import (
	"strconv"
	"strings"
)

// The host state: what the write-back left on the host, per path of the
// subtree, as a tree of records of the upper entries it was made from.
// A pass compares the upper directory with it and sends what differs.
// Records are changed as a pass plans its ops; those of ops the host
// refused are then poisoned (made unknown), so that the next pass looks
// at them again.

// record is what the host holds at one path.
type record struct {
	Kind   kind
	Ino    uint64 // the upper inode it was made from; 0: unknown
	Btime  int64  // and that inode's birth time; 0: unknown
	Ctime  int64  // the upper inode's ctime when written
	Size   int64  // and its size and mtime
	Mtime  int64
	Data   bool   // the data was the upper file's (not metacopy)
	Xattrs bool   // xattrs were set on it
	Origin string // the lower path it was moved from on the host, if moved
}

// hnode is one path of the host state.
type hnode struct {
	name     string
	parent   *hnode
	children map[string]*hnode
	rec      record
}

// hostState is the host state tree with its indexes. It is owned by the
// engine's goroutine.
type hostState struct {
	root     *hnode
	byIno    map[uint64][]*hnode // files and directories by upper inode
	byOrigin map[string]*hnode   // moved objects by the lower path they came from
	// changes are the state file's log lines of the changes made since
	// the last save (statefile.go); nil while replaying.
	changes []string
	logging bool
	records int // nodes in the tree
}

func newHostState() *hostState {
	return &hostState{root: &hnode{rec: record{Kind: kDir}}, byIno: map[uint64][]*hnode{}, byOrigin: map[string]*hnode{}}
}

// path returns n's path, "" for the root.
func (n *hnode) path() string {
	var parts []string
	for ; n.parent != nil; n = n.parent {
		parts = append(parts, n.name)
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "/")
}

// find returns the node at path, or nil.
func (s *hostState) find(path string) *hnode {
	n := s.root
	if path == "" {
		return n
	}
	for _, c := range strings.Split(path, "/") {
		if n = n.children[c]; n == nil {
			return nil
		}
	}
	return n
}

// node returns the node at path, making it and any missing parent as
// unknown placeholders.
func (s *hostState) node(path string) *hnode {
	n := s.root
	if path == "" {
		return n
	}
	for _, c := range strings.Split(path, "/") {
		next := n.children[c]
		if next == nil {
			s.records++
			next = &hnode{name: c, parent: n}
			if n.children == nil {
				n.children = map[string]*hnode{}
			}
			n.children[c] = next
		}
		n = next
	}
	return n
}

// set records r at path.
func (s *hostState) set(path string, r record) {
	n := s.node(path)
	s.unindex(n)
	n.rec = r
	s.index(n)
	s.note(opSet, path, recordFields(&r))
}

func (s *hostState) index(n *hnode) {
	if indexed(n.rec.Kind) && n.rec.Ino != 0 {
		s.byIno[n.rec.Ino] = append(s.byIno[n.rec.Ino], n)
	}
	if n.rec.Origin != "" {
		s.byOrigin[n.rec.Origin] = n
	}
}

func (s *hostState) unindex(n *hnode) {
	if l := s.byIno[n.rec.Ino]; len(l) > 0 {
		for i, m := range l {
			if m == n {
				l = append(l[:i], l[i+1:]...)
				break
			}
		}
		if len(l) == 0 {
			delete(s.byIno, n.rec.Ino)
		} else {
			s.byIno[n.rec.Ino] = l
		}
	}
	if n.rec.Origin != "" && s.byOrigin[n.rec.Origin] == n {
		delete(s.byOrigin, n.rec.Origin)
	}
}

// indexed reports the kinds matched by inode: whiteouts share one.
func indexed(k kind) bool {
	return k == kFile || k == kDir || k == kSymlink || k == kSpecial || k == kDevice
}

// remove drops n and everything under it.
func (s *hostState) remove(n *hnode) {
	if n.parent == nil {
		return
	}
	s.note(opRemove, n.path(), "")
	s.walk(n, func(m *hnode) {
		s.unindex(m)
		s.records--
	})
	delete(n.parent.children, n.name)
	n.parent = nil
}

// walk calls f on n and every node under it, parents first.
func (s *hostState) walk(n *hnode, f func(*hnode)) {
	f(n)
	for _, c := range n.children {
		s.walk(c, f)
	}
}

// move puts n (with what is under it) at path, replacing what is there.
func (s *hostState) move(n *hnode, path string) {
	if old := s.find(path); old == n {
		return
	} else if old != nil {
		s.remove(old)
	}
	s.note(opMove, n.path(), strconv.Quote(path))
	dir, name := splitPath(path)
	p := s.node(dir)
	if n.parent != nil {
		delete(n.parent.children, n.name)
	}
	n.parent, n.name = p, name
	if p.children == nil {
		p.children = map[string]*hnode{}
	}
	p.children[name] = n
}

// poison makes n and what is under it unknown: the next pass that
// looks at them sends them again.
func (s *hostState) poison(n *hnode) {
	s.note(opPoison, n.path(), "")
	s.walk(n, func(m *hnode) {
		s.unindex(m)
		m.rec = record{}
	})
}

// hostOf returns where the object that was at lower path lp is on the
// host now: under the longest prefix of lp that was moved, or lp.
func (s *hostState) hostOf(lp string) string {
	for p := lp; p != ""; p = parentPath(p) {
		if n := s.byOrigin[p]; n != nil && n.parent != nil {
			return joinPath(n.path(), lp[len(p):])
		}
	}
	return lp
}

// splitPath splits a relative path into its directory ("" for the
// root) and last name.
func splitPath(p string) (string, string) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return "", p
}

func parentPath(p string) string {
	d, _ := splitPath(p)
	return d
}

// joinPath joins a relative path and a rest that is "" or starts with
// "/".
func joinPath(p, rest string) string {
	if p == "" {
		return strings.TrimPrefix(rest, "/")
	}
	return p + rest
}

// child joins a directory path and a name.
func child(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// under reports whether p is dir or lies beneath it.
func under(p, dir string) bool {
	return dir == "" || p == dir || strings.HasPrefix(p, dir+"/")
}

// sameInode reports whether r was made from the inode e is: the same
// number, and the same birth time where both are known. An inode number
// freed and given to a new file (ext4 does so at once) is another object:
// a symlink deleted and made again with another target is not the same.
func (r *record) sameInode(e *entry) bool {
	return r.Ino == e.ino && (r.Btime == 0 || e.btime == 0 || r.Btime == e.btime)
}

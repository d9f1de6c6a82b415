package overlay

import (
	"os"

	"golang.org/x/sys/unix"
)

// A scan compares directories of the upper directory with the host
// state: entries that differ from their record (or have none) are
// changed, records whose name is gone from the upper directory are
// gone. A new directory (no record of its inode at its path) is scanned
// whole, as is everything in a full scan; otherwise only the directories
// the watcher marked.

type scan struct {
	upper    string
	modified map[string]bool // files written to (the watcher's IN_MODIFY)
	state    *hostState
	w        *watcher          // nil without watching
	changed  map[string]*entry // by path
	gone     map[string]bool   // paths of records gone from the upper directory
	scanned  map[string]bool   // directories scanned, true if whole
	errs     map[string]error  // directories that could not be read
	ino      map[uint64]string // path of each changed entry's inode
}

func newScan(upper string, st *hostState, w *watcher, modified map[string]bool) *scan {
	return &scan{upper: upper, modified: modified, state: st, w: w, changed: map[string]*entry{}, gone: map[string]bool{},
		scanned: map[string]bool{}, errs: map[string]error{}}
}

// root compares the upper root's own attributes with its record.
func (s *scan) root() {
	fd, err := openDir(s.upper, "")
	if err != nil {
		s.errs[""] = err
		return
	}
	defer unix.Close(fd)
	e, err := statEntry(fd, "", "")
	if err != nil {
		s.errs[""] = err
		return
	}
	if !s.unchanged(&s.state.root.rec, e) {
		s.add(fd, "", e)
	}
}

// dir scans directory rel; whole: its subdirectories too.
func (s *scan) dir(rel string, whole bool) {
	if !s.needs(rel, whole) {
		return
	}
	fd, err := openDir(s.upper, rel)
	if err != nil {
		if err != unix.ENOENT && err != unix.ENOTDIR {
			s.errs[rel] = err
		}
		return // moved or gone since marked: its parent's scan finds where
	}
	defer unix.Close(fd)
	s.scanFD(fd, rel, whole)
}

// needs reports whether rel is still to scan (whole), and notes it.
func (s *scan) needs(rel string, whole bool) bool {
	if done, ok := s.scanned[rel]; ok && (done || !whole) {
		return false
	}
	s.scanned[rel] = whole
	return true
}

// scanFD scans the directory open as fd.
func (s *scan) scanFD(fd int, rel string, whole bool) {
	if s.w != nil {
		if err := s.w.add(fd, rel); err != nil {
			s.errs[rel] = err
		}
	}
	names, err := readNames(fd)
	if err != nil {
		s.errs[rel] = err
		return
	}
	hd := s.state.find(rel)
	present := map[string]bool{}
	for _, name := range names {
		present[name] = true
		s.entry(fd, hd, rel, name, whole)
	}
	if hd != nil {
		for name := range hd.children {
			if !present[name] {
				s.gone[child(rel, name)] = true
			}
		}
	}
}

// rescan scans directory rel again: it changed since it was scanned.
// What the scan noted under it, at any depth, goes first: a directory
// moved out of rel and back while the scan ran was seen at both places,
// and what was noted under its other path is not there.
func (s *scan) rescan(rel string) {
	below := func(p string) bool { return p != rel && under(p, rel) }
	for p := range s.gone {
		if below(p) {
			delete(s.gone, p)
		}
	}
	for p := range s.changed {
		if below(p) {
			delete(s.changed, p)
		}
	}
	whole := s.scanned[rel]
	for p := range s.scanned {
		if p == rel || below(p) {
			delete(s.scanned, p)
		}
	}
	s.dir(rel, whole)
}

// entry looks at name in the directory rel open as dfd.
func (s *scan) entry(dfd int, hd *hnode, dir, name string, whole bool) {
	rel := child(dir, name)
	e, err := statEntry(dfd, name, rel)
	if err != nil {
		s.noteErr(rel, err)
		return
	}
	var rec *record
	if hd != nil {
		if n := hd.children[name]; n != nil {
			rec = &n.rec
		}
	}
	if rec == nil || !s.unchanged(rec, e) {
		s.add(dfd, name, e)
	}
	if e.kind != kDir {
		return
	}
	sub := whole || rec == nil || !rec.sameInode(e) || rec.Kind != kDir
	if !s.needs(rel, sub) {
		return
	}
	cfd, err := openChild(dfd, name)
	if err != nil {
		return
	}
	s.scanFD(cfd, rel, sub)
	unix.Close(cfd)
}

// add notes a changed entry, with its details.
func (s *scan) add(dfd int, name string, e *entry) {
	if err := e.details(dfd, name); err != nil {
		s.noteErr(e.path, err)
		return
	}
	s.changed[e.path] = e
}

// noteErr notes an error reading rel, but ENOENT: what went since it
// was listed has its directory marked dirty again.
func (s *scan) noteErr(rel string, err error) {
	if err != unix.ENOENT {
		s.errs[rel] = err
	}
}

// unchanged reports whether e is what rec recorded. A whiteout stays a
// whiteout whatever its inode (overlayfs links whiteouts to one inode,
// whose ctime each new link changes). A write sets ctime and mtime as
// it starts and grows the size as it goes, and raises IN_MODIFY when it
// is done: so the size and mtime are compared too, and a file written
// to since is changed whatever its times.
func (s *scan) unchanged(rec *record, e *entry) bool {
	if rec.Kind != e.kind {
		return false
	}
	if e.kind == kWhiteout {
		return true
	}
	return rec.sameInode(e) && rec.Ctime == e.ctime && rec.Size == e.size && rec.Mtime == e.mtime && !s.modified[e.path]
}

// unwrap returns the errno inside an os error.
func unwrap(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	if se, ok := err.(*os.SyscallError); ok {
		return se.Err
	}
	return err
}

package overlay

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A scan compares directories of the upper directory with the host
// state: entries that differ from their record (or have none) are
// changed, records whose name is gone from the upper directory are
// gone. A new directory (no record of its inode at its path) is scanned
// whole, as is everything in a full scan; otherwise only the directories
// the watcher marked.

type scan struct {
	upper   string
	state   *hostState
	w       *watcher          // nil without watching
	changed map[string]*entry // by path
	gone    map[string]bool   // paths of records gone from the upper directory
	scanned map[string]bool   // directories scanned, true if whole
	errs    map[string]error  // directories that could not be read
	ino     map[uint64]string // path of each changed entry's inode
}

func newScan(upper string, st *hostState, w *watcher) *scan {
	return &scan{upper: upper, state: st, w: w, changed: map[string]*entry{}, gone: map[string]bool{},
		scanned: map[string]bool{}, errs: map[string]error{}, ino: map[uint64]string{}}
}

// root compares the upper root's own attributes with its record.
func (s *scan) root() {
	e, err := statEntry(s.upper, "")
	if err != nil {
		s.errs[""] = err
		return
	}
	if !unchanged(&s.state.root.rec, e) {
		s.add(e)
	}
}

// dir scans directory rel; whole: its subdirectories too.
func (s *scan) dir(rel string, whole bool) {
	if done, ok := s.scanned[rel]; ok && (done || !whole) {
		return
	}
	s.scanned[rel] = whole
	full := filepath.Join(s.upper, rel)
	if s.w != nil {
		if err := s.w.add(rel); err != nil && err != unix.ENOENT && err != unix.ENOTDIR {
			s.errs[rel] = err
		}
	}
	names, err := readNames(full)
	if err != nil {
		if err != unix.ENOENT && err != unix.ENOTDIR {
			s.errs[rel] = err
		}
		return // moved or gone since marked: its parent's scan finds where
	}
	hd := s.state.find(rel)
	present := map[string]bool{}
	for _, name := range names {
		present[name] = true
		s.entry(hd, child(rel, name), whole)
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
func (s *scan) rescan(rel string) {
	for _, m := range []map[string]bool{s.gone} {
		for p := range m {
			if parentPath(p) == rel {
				delete(m, p)
			}
		}
	}
	for p := range s.changed {
		if parentPath(p) == rel && p != "" {
			delete(s.changed, p)
		}
	}
	whole := s.scanned[rel]
	delete(s.scanned, rel)
	s.dir(rel, whole)
}

// entry looks at one entry of a scanned directory.
func (s *scan) entry(hd *hnode, rel string, whole bool) {
	e, err := statEntry(filepath.Join(s.upper, rel), rel)
	if err != nil {
		return // gone since listed: its directory is dirty again
	}
	var rec *record
	if hd != nil {
		if n := hd.children[filepath.Base(rel)]; n != nil {
			rec = &n.rec
		}
	}
	if rec == nil || !unchanged(rec, e) {
		s.add(e)
	}
	if e.kind == kDir {
		s.dir(rel, whole || rec == nil || rec.Ino != e.ino)
	}
}

// add notes a changed entry, with its details.
func (s *scan) add(e *entry) {
	if err := e.details(filepath.Join(s.upper, e.path)); err != nil {
		return // changed under the scan: its directory is dirty again
	}
	s.changed[e.path] = e
	if indexed(e.kind) {
		s.ino[e.ino] = e.path
	}
}

// unchanged reports whether e is what rec recorded. A whiteout stays a
// whiteout whatever its inode (overlayfs links whiteouts to one inode,
// whose ctime each new link changes).
func unchanged(rec *record, e *entry) bool {
	if rec.Kind != e.kind {
		return false
	}
	return e.kind == kWhiteout || (rec.Ino == e.ino && rec.Ctime == e.ctime)
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, unwrap(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return names, unwrap(err)
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

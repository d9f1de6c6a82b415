package overlay

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The state file holds the host state between passes and across
// restarts: a header line, then a line per path, parents first, with
// the path and origin quoted:
//
//	"dir/name" kind ino ctime size mtime flags "origin"
//
// It is written whole after each pass that changed it, to a new file
// that is fsync'd and renamed over the old one, so a crash leaves one
// or the other. A crash after the host applied ops but before the file
// was replaced makes the next pass send them again, which is harmless:
// every op is idempotent.

const stateHeader = "cachefs-overlay-state 1"

const (
	flagData   = 1 << 0
	flagXattrs = 1 << 1
)

// saveState writes s to path by replacing it, and returns the number
// of records.
func saveState(s *hostState, path string) (int, error) {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	fmt.Fprintln(w, stateHeader)
	records := 0
	s.walk(s.root, func(n *hnode) {
		writeRecord(w, n)
		records++
	})
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return records, syncDir(filepath.Dir(path))
}

func writeRecord(w *bufio.Writer, n *hnode) {
	r := &n.rec
	flags := 0
	if r.Data {
		flags |= flagData
	}
	if r.Xattrs {
		flags |= flagXattrs
	}
	fmt.Fprintf(w, "%s %d %d %d %d %d %d %s\n", strconv.Quote(n.path()), r.Kind, r.Ino, r.Ctime, r.Size, r.Mtime,
		flags, strconv.Quote(r.Origin))
}

// loadState reads the state file at path; a missing file is an empty
// state.
func loadState(path string) (*hostState, error) {
	s := newHostState()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	if !sc.Scan() || sc.Text() != stateHeader {
		return nil, fmt.Errorf("%s: not an overlay state file", path)
	}
	for sc.Scan() {
		p, r, err := parseRecord(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		s.set(p, r)
	}
	return s, sc.Err()
}

// parseRecord parses one line of the state file.
func parseRecord(line string) (string, record, error) {
	var r record
	p, rest, err := unquoteField(line)
	if err != nil {
		return "", r, err
	}
	f := strings.SplitN(strings.TrimPrefix(rest, " "), " ", 7)
	if len(f) != 7 {
		return "", r, fmt.Errorf("bad line %q", line)
	}
	var n [6]int64
	for i := range n {
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return "", r, fmt.Errorf("bad line %q: %v", line, err)
		}
	}
	if r.Origin, _, err = unquoteField(f[6]); err != nil {
		return "", r, fmt.Errorf("bad line %q: %v", line, err)
	}
	r.Kind, r.Ino, r.Ctime, r.Size, r.Mtime = kind(n[0]), uint64(n[1]), n[2], n[3], n[4]
	r.Data, r.Xattrs = n[5]&flagData != 0, n[5]&flagXattrs != 0
	return p, r, nil
}

// unquoteField reads a quoted string at the start of s.
func unquoteField(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", err
	}
	v, err := strconv.Unquote(q)
	return v, s[len(q):], err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

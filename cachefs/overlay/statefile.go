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
// restarts: a header line with its generation, then a line per path,
// parents first, with the path and origin quoted:
//
//	"dir/name" kind ino ctime size mtime flags btime "origin"
//
// (btime, the upper inode's birth time, is absent from lines written
// before it was kept: such a record's is unknown.)
// It is written whole, to a new file that is fsync'd and renamed over
// the old one, so a crash leaves one or the other. Between two such
// snapshots each pass appends its changes to a log (state.log, also
// fsync'd): lines "S record", "R path" (removed), "M path newpath"
// (moved) and "X path" (poisoned), after a header naming the snapshot's
// generation they follow. Loading replays the log on the snapshot of
// its generation; the log is compacted into a new snapshot once it
// outgrows it. A crash after the host applied ops but before they were
// logged makes the next pass send them again, which is harmless: every
// op is idempotent.

const stateHeader = "cachefs-overlay-state 2"

// Log ops.
const (
	opSet    = "S"
	opRemove = "R"
	opMove   = "M"
	opPoison = "X"
)

const logHeader = "cachefs-overlay-log"

const (
	flagData   = 1 << 0
	flagXattrs = 1 << 1
)

// stateFile is the state's snapshot at path and its log at path.log.
type stateFile struct {
	path     string
	gen      uint64   // the snapshot's generation
	logLines int      // lines in the log
	log      *os.File // the log, open for appending once written to
}

// note logs a change of the state, unless replaying.
func (s *hostState) note(op, path, rest string) {
	if !s.logging {
		return
	}
	line := op + " " + strconv.Quote(path)
	if rest != "" {
		line += " " + rest
	}
	s.changes = append(s.changes, line)
}

// recordFields formats a record's fields after its path.
func recordFields(r *record) string {
	flags := 0
	if r.Data {
		flags |= flagData
	}
	if r.Xattrs {
		flags |= flagXattrs
	}
	return fmt.Sprintf("%d %d %d %d %d %d %d %s", r.Kind, r.Ino, r.Ctime, r.Size, r.Mtime, flags, r.Btime, strconv.Quote(r.Origin))
}

// loadState reads the state at path and its log; no file is an empty
// state.
func loadState(path string) (*hostState, *stateFile, error) {
	s := newHostState()
	f := &stateFile{path: path}
	if err := f.readSnapshot(s); err != nil {
		return nil, nil, err
	}
	if err := f.replayLog(s); err != nil {
		return nil, nil, err
	}
	s.logging = true
	return s, f, nil
}

func (f *stateFile) readSnapshot(s *hostState) error {
	return readLines(f.path, func(first bool, line string) error {
		if first {
			_, err := fmt.Sscanf(line, stateHeader+" %d", &f.gen)
			return err
		}
		p, r, err := parseRecord(line)
		if err == nil {
			s.set(p, r)
		}
		return err
	})
}

// replayLog applies the log, if it follows this snapshot.
func (f *stateFile) replayLog(s *hostState) error {
	stale := false
	return readLines(f.path+".log", func(first bool, line string) error {
		if first {
			var gen uint64
			_, err := fmt.Sscanf(line, logHeader+" %d", &gen)
			stale = gen != f.gen
			return err
		}
		if stale {
			return nil
		}
		f.logLines++
		return replayLine(s, line)
	})
}

// replayLine applies one log line.
func replayLine(s *hostState, line string) error {
	op, rest, _ := strings.Cut(line, " ")
	if op == opSet {
		p, r, err := parseRecord(rest)
		if err == nil {
			s.set(p, r)
		}
		return err
	}
	p, rest, err := unquoteField(rest)
	if err != nil {
		return err
	}
	n := s.find(p)
	switch {
	case n == nil:
	case op == opRemove:
		s.remove(n)
	case op == opPoison:
		s.poison(n)
	case op == opMove:
		to, _, err := unquoteField(strings.TrimPrefix(rest, " "))
		if err != nil {
			return err
		}
		s.move(n, to)
	default:
		return fmt.Errorf("bad log line %q", line)
	}
	return nil
}

// readLines calls f on each line of the file at path; a missing file
// has none.
func readLines(path string, f func(first bool, line string) error) error {
	file, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for first := true; sc.Scan(); first = false {
		if err := f(first, sc.Text()); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
	}
	return sc.Err()
}

// save logs the state's changes, or writes a new snapshot once the log
// outgrows the state. It returns the number of records after a
// snapshot, else -1.
func (f *stateFile) save(s *hostState) (int, error) {
	if len(s.changes) == 0 {
		return -1, nil
	}
	if f.logLines+len(s.changes) > 4*s.records+10000 {
		return s.records, f.compact(s)
	}
	if err := f.appendLog(s.changes); err != nil {
		return -1, err
	}
	s.changes = s.changes[:0]
	return -1, nil
}

// appendLog appends lines to the log and syncs it.
func (f *stateFile) appendLog(lines []string) error {
	if f.log == nil {
		if f.logLines == 0 { // no log of this snapshot yet (or a stale one)
			if err := f.replaceLog(); err != nil {
				return err
			}
		}
		l, err := os.OpenFile(f.path+".log", os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		f.log = l
	}
	w := bufio.NewWriterSize(f.log, 1<<16)
	for _, l := range lines {
		w.WriteString(l)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return err
	}
	f.logLines += len(lines)
	return f.log.Sync()
}

// compact writes the state as a snapshot of the next generation, then
// starts an empty log of that generation.
func (f *stateFile) compact(s *hostState) error {
	if err := writeSnapshot(f.path, s, f.gen+1); err != nil {
		return err
	}
	f.gen++
	s.changes = s.changes[:0]
	return f.replaceLog()
}

// writeSnapshot writes s as the snapshot of generation gen.
func writeSnapshot(path string, s *hostState, gen uint64) error {
	return writeReplacing(path, func(w *bufio.Writer) {
		fmt.Fprintf(w, "%s %d\n", stateHeader, gen)
		s.walk(s.root, func(n *hnode) {
			w.WriteString(strconv.Quote(n.path()) + " " + recordFields(&n.rec) + "\n")
		})
	})
}

// replaceLog makes the log empty, of the snapshot's generation.
func (f *stateFile) replaceLog() error {
	if f.log != nil {
		f.log.Close()
		f.log = nil
	}
	f.logLines = 0
	return writeReplacing(f.path+".log", func(w *bufio.Writer) {
		fmt.Fprintf(w, "%s %d\n", logHeader, f.gen)
	})
}

func (f *stateFile) close() {
	if f.log != nil {
		f.log.Close()
	}
}

// writeReplacing writes a file through fill to a new file, syncs it and
// renames it over path.
func writeReplacing(path string, fill func(*bufio.Writer)) error {
	tmp := path + ".new"
	file, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(file, 1<<16)
	fill(w)
	err = w.Flush()
	if err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// parseRecord parses a record line: a quoted path and the fields.
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
	origin := f[6]
	if !strings.HasPrefix(origin, `"`) { // the birth time first
		bt, rest, _ := strings.Cut(origin, " ")
		if r.Btime, err = strconv.ParseInt(bt, 10, 64); err != nil {
			return "", r, fmt.Errorf("bad line %q: %v", line, err)
		}
		origin = rest
	}
	if r.Origin, _, err = unquoteField(origin); err != nil {
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

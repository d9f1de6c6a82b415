package overlay

import (
	"context"
	"errors"
	"log"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The engine writes an upper directory back in passes, on one goroutine
// that owns the host state and the watcher. A pass runs once changes
// have gathered (none came for Options.Gather, or MaxGather passed
// since the first the watcher saw), at
// Flush, and after a failed pass (growing pauses); the first pass, a
// pass after a queue overflow and every Flush rescan the whole upper
// directory.

// Options configure an Engine. The zero value of each field but Upper,
// State and Send is a working default.
type Options struct {
	Upper  string // the upper directory
	State  string // the state file
	Prefix string // the subtree's path relative to the export root ("" the root)
	Send   Sender
	// Watch follows the upper directory with inotify and writes changes
	// back as they come. Without it passes run only at Flush (and at
	// the start).
	Watch bool
	// Gather is how long no change must come before a pass. Zero: 20ms.
	Gather time.Duration
	// MaxGather bounds how long changes gather after the first one, if
	// they keep coming. Zero: 1s, or Gather if longer.
	MaxGather time.Duration
	Logf      func(format string, args ...any) // nil: log.Printf
}

// Stats count an engine's work.
type Stats struct {
	Passes, FullPasses uint64
	Ops, Bytes         uint64
	Retries            uint64 // passes made again after a failure
	Failures           int    // changes the host refuses now
	StateRecords       int
	Quieted            uint64 // directories whose IN_MODIFY a write took (quiet.go)
}

// ErrClosed is returned by Flush after Close.
var ErrClosed = errors.New("overlay: write-back closed")

// Engine writes back one upper directory.
type Engine struct {
	o      Options            // immutable
	wake   int                // immutable: eventfd that wakes run
	reqs   chan *flushReq     // immutable
	stop   chan struct{}      // immutable: closed by Close
	done   chan struct{}      // immutable: closed when run returns
	ctx    context.Context    // immutable: cancelled by Close
	cancel context.CancelFunc // immutable

	closeOnce sync.Once

	st *hostState // owned by run
	sf *stateFile // owned by run
	w  *watcher   // owned by run; nil without Watch
	// rescan, owned by run, are directories the next pass scans whole
	// before it answers a flush: directories moved by the last pass.
	rescan []string

	mu       sync.Mutex // protects the following
	failures map[string]Failure
	stats    Stats
}

type flushReq struct {
	path  string
	reply chan []Failure
}

// Start loads the state and starts writing back: the first pass
// rescans everything.
func Start(o Options) (*Engine, error) {
	e, err := newEngine(o)
	if err != nil {
		return nil, err
	}
	go e.run()
	return e, nil
}

// newEngine makes an engine whose goroutine is not started.
func newEngine(o Options) (*Engine, error) {
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.Gather == 0 {
		o.Gather = 20 * time.Millisecond
	}
	if o.MaxGather == 0 {
		o.MaxGather = max(time.Second, o.Gather)
	}
	st, sf, err := loadState(o.State)
	if err != nil {
		return nil, err
	}
	e := &Engine{o: o, st: st, sf: sf, reqs: make(chan *flushReq, 16), stop: make(chan struct{}),
		done: make(chan struct{}), failures: map[string]Failure{}}
	if o.Watch {
		if e.w, err = newWatcher(o.Upper); err != nil {
			return nil, err
		}
	}
	if e.wake, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		e.closeFDs()
		return nil, err
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

// Flush returns once everything under path (relative to the subtree's
// root, "" for all) that was in the upper directory when it was called
// is on the host, with the changes the host refused.
func (e *Engine) Flush(ctx context.Context, path string) ([]Failure, error) {
	r := &flushReq{path: path, reply: make(chan []Failure, 1)}
	select {
	case e.reqs <- r:
	case <-e.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	e.kick()
	select {
	case f := <-r.reply:
		return f, nil
	case <-e.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops the engine after the pass in progress, if any.
func (e *Engine) Close() {
	e.closeOnce.Do(func() {
		close(e.stop)
		e.cancel()
		e.kick()
		<-e.done
		e.closeFDs()
	})
}

func (e *Engine) closeFDs() {
	e.sf.close()
	if e.w != nil {
		e.w.close()
	}
	if e.wake > 0 {
		unix.Close(e.wake)
	}
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Failures = len(e.failures)
	return s
}

// Failures returns the changes the host refuses now.
func (e *Engine) Failures() []Failure {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failuresUnderLocked("")
}

func (e *Engine) failuresUnderLocked(path string) []Failure {
	var out []Failure
	for p, f := range e.failures {
		if under(p, path) {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b Failure) int { return byDepth(a.Path, b.Path) })
	return out
}

func (e *Engine) kick() {
	var one = [8]byte{1}
	unix.Write(e.wake, one[:])
}

package overlay

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// host is an in-process host server over a unix socket, and a sender
// that applies write-back ops on it and records them.
type host struct {
	export string
	c      *upstream.Client
	mu     sync.Mutex
	ops    []upstream.WBOp // every op sent
}

func startHost(t *testing.T) *host {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: whiteouts and trusted.overlay xattrs")
	}
	h := &host{export: t.TempDir()}
	srv, err := upstream.NewServer(upstream.ServerOptions{Export: h.export, Logf: t.Logf})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	dir, err := os.MkdirTemp("", "ovl")
	if err != nil {
		t.Fatal(err)
	}
	l, err := upstream.Listen("unix://" + filepath.Join(dir, "s"))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	go srv.Serve(l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.c, err = upstream.NewClient(ctx, upstream.ClientOptions{Addr: "unix://" + filepath.Join(dir, "s"), Logf: t.Logf})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() {
		h.c.Close()
		l.Close()
		srv.Close()
		os.RemoveAll(dir)
	})
	return h
}

func (h *host) send(ctx context.Context, ops []upstream.WBOp) ([]uint32, error) {
	h.mu.Lock()
	for _, op := range ops {
		op.Data = nil
		h.ops = append(h.ops, op)
	}
	h.mu.Unlock()
	var resp upstream.ApplyResp
	err := h.c.Call(ctx, upstream.OpApply, &upstream.ApplyReq{Ops: ops}, &resp)
	return resp.Errnos, err
}

// take returns the ops sent since the last take.
func (h *host) take() []upstream.WBOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := h.ops
	h.ops = nil
	return ops
}

// count returns how many ops of kind k are in ops.
func count(ops []upstream.WBOp, k uint8) int {
	n := 0
	for _, op := range ops {
		if op.Kind == k {
			n++
		}
	}
	return n
}

// fixture is a host, a hand-made upper directory and an engine on them.
type fixture struct {
	t     *testing.T
	h     *host
	upper string
	state string
	eng   *Engine
}

func newFixture(t *testing.T) *fixture {
	return &fixture{t: t, h: startHost(t), upper: t.TempDir(), state: filepath.Join(t.TempDir(), "state")}
}

func (f *fixture) start(watch bool) {
	eng, err := Start(Options{Upper: f.upper, State: f.state, Send: f.h.send, Watch: watch, Logf: f.t.Logf})
	if err != nil {
		f.t.Fatalf("Start: %v", err)
	}
	f.eng = eng
	f.t.Cleanup(eng.Close)
}

// restart starts a new engine on the same state, as a new daemon.
func (f *fixture) restart() {
	f.eng.Close()
	f.start(false)
}

// flush flushes everything and fails the test on failures. The first
// starts the engine, on the upper directory the test made.
func (f *fixture) flush() []upstream.WBOp {
	f.t.Helper()
	if f.eng == nil {
		f.start(false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	failed, err := f.eng.Flush(ctx, "")
	if err != nil || len(failed) > 0 {
		f.t.Fatalf("Flush: %v, failures %+v", err, failed)
	}
	return f.h.take()
}

// hostFile and upperFile write files (making their directories).
func (f *fixture) hostFile(rel, data string)  { writeFile(f.t, f.h.export, rel, data) }
func (f *fixture) upperFile(rel, data string) { writeFile(f.t, f.upper, rel, data) }

func writeFile(t *testing.T, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// whiteout makes a whiteout at rel in the upper directory.
func (f *fixture) whiteout(rel string) {
	f.t.Helper()
	p := filepath.Join(f.upper, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := unix.Mknod(p, unix.S_IFCHR|0, 0); err != nil {
		f.t.Fatalf("mknod whiteout: %v", err)
	}
}

// mark sets an xattr on an upper path.
func (f *fixture) mark(rel, name, value string) {
	f.t.Helper()
	if err := unix.Lsetxattr(filepath.Join(f.upper, rel), name, []byte(value), 0); err != nil {
		f.t.Fatalf("setxattr %s %s: %v", rel, name, err)
	}
}

// wantHost checks a host file's content ("" for a directory; absent
// with want == "-").
func (f *fixture) wantHost(rel, want string) {
	f.t.Helper()
	p := filepath.Join(f.h.export, rel)
	fi, err := os.Lstat(p)
	switch {
	case want == "-":
		if err == nil {
			f.t.Errorf("host %s exists, want it gone", rel)
		}
	case err != nil:
		f.t.Errorf("host %s: %v", rel, err)
	case want == "" && !fi.IsDir():
		f.t.Errorf("host %s is not a directory", rel)
	case want != "":
		b, _ := os.ReadFile(p)
		if string(b) != want {
			f.t.Errorf("host %s holds %q, want %q", rel, b, want)
		}
	}
}

// upperStat lstats an upper path.
func (f *fixture) upperStat(rel string) unix.Stat_t {
	f.t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(f.upper, rel), &st); err != nil {
		f.t.Fatal(err)
	}
	return st
}

// seed writes a state with r at path, as a previous pass would have
// left it; the engine is not started yet.
func (f *fixture) seed(path string, r record) {
	f.t.Helper()
	s := newHostState()
	s.set(path, r)
	if err := (&stateFile{path: f.state}).compact(s); err != nil {
		f.t.Fatal(err)
	}
}

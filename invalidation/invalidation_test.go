package invalidation

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type recorder struct {
	mu sync.Mutex
	cs []Change
}

func (r *recorder) add(c Change) {
	r.mu.Lock()
	r.cs = append(r.cs, c)
	r.mu.Unlock()
}

// wait returns once a change with op and name was recorded.
func (r *recorder) wait(t *testing.T, op Op, name string) Change {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		r.mu.Lock()
		for _, c := range r.cs {
			if c.Op == op && c.Name == name {
				r.mu.Unlock()
				return c
			}
		}
		r.mu.Unlock()
	}
	t.Fatalf("no change %d %q; got %+v", op, name, r.cs)
	return Change{}
}

func dirFD(t *testing.T, p string) int {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestWatcherRecursive(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a", "b"), 0755)
	var r recorder
	w, err := NewWatcher(r.add)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.AddTree(dirFD(t, root)); err != nil {
		t.Fatal(err)
	}
	if got := w.Watches(); got != 3 {
		t.Errorf("watches = %d, want 3 (root, a, a/b)", got)
	}
	os.WriteFile(filepath.Join(root, "a", "b", "deep"), nil, 0644)
	c := r.wait(t, Create, "deep")
	var st unix.Stat_t
	unix.Stat(filepath.Join(root, "a", "b"), &st)
	if c.DirIno != st.Ino {
		t.Errorf("create reported in dir ino %d, want a/b's %d", c.DirIno, st.Ino)
	}
	os.Mkdir(filepath.Join(root, "new"), 0755)
	r.wait(t, Create, "new")
	os.WriteFile(filepath.Join(root, "new", "inside"), nil, 0644)
	r.wait(t, Create, "inside") // directories created later are watched too
	os.Rename(filepath.Join(root, "new", "inside"), filepath.Join(root, "moved"))
	from, to := r.wait(t, MoveFrom, "inside"), r.wait(t, MoveTo, "moved")
	if from.Cookie == 0 || from.Cookie != to.Cookie {
		t.Errorf("move cookies %d and %d, want equal and nonzero", from.Cookie, to.Cookie)
	}
	os.Chmod(filepath.Join(root, "moved"), 0600)
	r.wait(t, Attrib, "moved")
	os.WriteFile(filepath.Join(root, "moved"), []byte("x"), 0600)
	r.wait(t, Modify, "moved")
	os.Remove(filepath.Join(root, "moved"))
	r.wait(t, Delete, "moved")
}

func TestWatcherRemoveTree(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "a"), 0755)
	w, _ := NewWatcher(func(Change) {})
	defer w.Close()
	fd := dirFD(t, root)
	w.AddTree(fd)
	w.AddTree(fd)
	var st unix.Stat_t
	unix.Fstat(fd, &st)
	w.RemoveTree(st.Dev, st.Ino)
	if w.Watches() != 2 {
		t.Errorf("after one of two RemoveTree: %d watches, want 2", w.Watches())
	}
	w.RemoveTree(st.Dev, st.Ino)
	if w.Watches() != 0 {
		t.Errorf("after the last RemoveTree: %d watches, want 0", w.Watches())
	}
}

func TestBatcherCoalesces(t *testing.T) {
	var mu sync.Mutex
	var got [][]Change
	b := NewBatcher(BatcherOptions{Window: 20 * time.Millisecond, Send: func(cs []Change, _ time.Time) {
		mu.Lock()
		got = append(got, cs)
		mu.Unlock()
	}})
	defer b.Close()
	for i := 0; i < 10; i++ {
		b.Add(Change{Op: Modify, Name: "f"})
	}
	b.Add(Change{Op: Create, Name: "g"})
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || len(got[0]) != 2 {
		t.Fatalf("batches %+v, want one batch of two changes", got)
	}
	if b.Coalesced.Load() != 9 {
		t.Errorf("coalesced %d, want 9", b.Coalesced.Load())
	}
}

func TestBatcherOverflowCollapsesToRoots(t *testing.T) {
	block := make(chan struct{})
	var mu sync.Mutex
	var got [][]Change
	b := NewBatcher(BatcherOptions{Window: time.Millisecond, MaxBatch: 1, MaxQueued: 1,
		Send: func(cs []Change, _ time.Time) {
			<-block
			mu.Lock()
			got = append(got, cs)
			mu.Unlock()
		}})
	defer b.Close()
	for i := 0; i < 50; i++ {
		b.Add(Change{Op: Create, Name: string(rune('a' + i%26)), RootIno: 7, Cookie: uint32(i)})
	}
	close(block)
	time.Sleep(100 * time.Millisecond)
	if b.Overflows.Load() == 0 {
		t.Fatal("a blocked sender caused no overflow")
	}
	mu.Lock()
	defer mu.Unlock()
	last := got[len(got)-1]
	if len(last) != 1 || last[0].Op != Overflow || last[0].RootIno != 7 {
		t.Errorf("last batch %+v, want one overflow of root 7", last)
	}
}

func TestActuatorThread(t *testing.T) {
	a := NewActuator()
	defer a.Close()
	var tid int
	a.Run(func() error { tid = unix.Gettid(); return nil })
	if uint32(tid) != a.Tid() || tid == unix.Gettid() {
		t.Errorf("actuator ran on thread %d, reports %d (caller %d)", tid, a.Tid(), unix.Gettid())
	}
}

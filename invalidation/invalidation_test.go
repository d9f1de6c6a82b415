//go:build linux

package invalidation

import (
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
		if c, ok := r.find(op, name); ok {
			return c
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Fatalf("no change %d %q; got %+v", op, name, r.cs)
	return Change{}
}

// find returns the first recorded change with op and name.
func (r *recorder) find(op Op, name string) (Change, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cs {
		if c.Op == op && c.Name == name {
			return c, true
		}
	}
	return Change{}, false
}

// named returns the recorded changes of name.
func (r *recorder) named(name string) []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Change
	for _, c := range r.cs {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

func dirFD(t *testing.T, p string) int {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
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

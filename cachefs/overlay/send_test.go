package overlay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// TestSendOneBatchInFlight: while the next batch is made, one batch is
// in flight, never two; the batches go in order, none after a failed
// one, and the groups from the failed batch on are poisoned, those
// before it not.
func TestSendOneBatchInFlight(t *testing.T) {
	const n = 3*batchOps + 10
	var groups []*group
	poisoned := make([]bool, n)
	for i := range n {
		g := &group{path: fmt.Sprintf("d%d", i), fail: func() { poisoned[i] = true }}
		g.add(upstream.WBOp{Kind: upstream.WBMkdir, Path: g.path, Mode: 0o755})
		groups = append(groups, g)
	}
	var flying, most, calls atomic.Int32
	var next atomic.Int32 // the index of the first op of the next batch
	send := func(ctx context.Context, ops []upstream.WBOp) ([]uint32, error) {
		if f := flying.Add(1); f > most.Load() {
			most.Store(f)
		}
		defer flying.Add(-1)
		time.Sleep(10 * time.Millisecond) // the sender may make the next batch meanwhile
		if want := fmt.Sprintf("d%d", next.Load()); ops[0].Path != want {
			t.Errorf("batch %d starts at %s, want %s", calls.Load(), ops[0].Path, want)
		}
		next.Add(int32(len(ops)))
		errnos := make([]uint32, len(ops))
		if calls.Add(1) == 2 {
			return nil, errors.New("lost")
		}
		errnos[1] = uint32(syscall.EPERM)
		return errnos, nil
	}
	out := sendGroups(context.Background(), t.TempDir(), send, groups)
	if c := calls.Load(); c != 2 {
		t.Errorf("sender called %d times, want 2 (none after the failed batch)", c)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d batches in flight at once, want 1", m)
	}
	if out.err == nil || out.ops != batchOps || len(out.ok) != batchOps-1 {
		t.Errorf("got err %v, %d ops, %d groups ok; want an error, %d ops, %d ok", out.err, out.ops, len(out.ok), batchOps, batchOps-1)
	}
	if len(out.failed) != 1 || out.failed[0].Path != "d1" || out.failed[0].Errno != syscall.EPERM {
		t.Errorf("failures %+v, want d1's EPERM", out.failed)
	}
	for i, p := range poisoned {
		if want := i == 1 || i >= batchOps; p != want {
			t.Fatalf("group %d poisoned %v, want %v", i, p, want)
		}
	}
}

// TestSendManyBatchesOfData: files whose data fills several batches
// (and a file larger than one) arrive whole, each with its own bytes,
// though a batch's data buffer is reused once the batch is answered.
func TestSendManyBatchesOfData(t *testing.T) {
	f := newFixture(t)
	want := map[string]string{}
	for i := range 24 {
		size := 300 << 10
		if i == 7 {
			size = batchBytes + 12345
		}
		data := strings.Repeat(fmt.Sprintf("%c%d.", 'a'+i, i), size/4)
		rel := fmt.Sprintf("d%d/f%d", i%3, i)
		f.upperFile(rel, data)
		want[rel] = data
	}
	ops := f.flush()
	if n := count(ops, upstream.WBWrite); n < 24 {
		t.Errorf("%d WBWrite ops, want at least 24", n)
	}
	for rel, data := range want {
		f.wantHost(rel, data)
	}
}

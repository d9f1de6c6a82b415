//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/upstream"
)

// logRecorder keeps what a harness logs, and passes it on to the test.
type logRecorder struct {
	t     *testing.T
	mu    sync.Mutex // protects lines
	lines []string
}

func (r *logRecorder) logf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.lines = append(r.lines, s)
	r.mu.Unlock()
	r.t.Log(s)
}

func (r *logRecorder) has(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// TestLinkDropped cuts the guest's link to the host three times while a
// file is read through one open handle: the client reconnects, the host
// resumes the session, and the reads go on through the same handle with
// the right data.
func TestLinkDropped(t *testing.T) {
	logs := &logRecorder{t: t}
	env := harness.Start(t, harness.Options{Policy: consistency.NewPolicy(consistency.Consistent), Logf: logs.logf})
	const size, chunk = 8 << 20, 64 << 10
	want := pattern(7, size)
	if err := os.WriteFile(filepath.Join(env.Export, "f"), want, 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	f, err := os.Open(filepath.Join(env.Mountpoint, "f"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()

	epoch := env.Client.Epoch()
	var trafficBefore uint64
	var drops sync.WaitGroup
	buf := make([]byte, chunk)
	for off := 0; off < size; off += chunk {
		if off == size/2 {
			trafficBefore = hostTraffic(env)
			drops.Add(1)
			go dropLink(env.Client, &drops)
		}
		if _, err := f.ReadAt(buf, int64(off)); err != nil {
			t.Fatalf("ReadAt %d: %v", off, err)
		}
		if !bytes.Equal(buf, want[off:off+chunk]) {
			t.Fatalf("ReadAt %d: data differs", off)
		}
	}
	drops.Wait()
	checkResumed(t, env, logs, epoch, trafficBefore)
}

// dropLink cuts the link three times, a millisecond apart, racing the
// reads in flight.
func dropLink(c *upstream.Client, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; i < 3; i++ {
		c.Drop()
		time.Sleep(time.Millisecond)
	}
}

// checkResumed asserts the link came back to the same host session and
// carried file data after the drops.
func checkResumed(t *testing.T, env *harness.Env, logs *logRecorder, epoch, trafficBefore uint64) {
	t.Helper()
	if !logs.has("reconnected to host") {
		t.Errorf("the client never logged reconnecting")
	}
	if got := env.Client.Epoch(); got != epoch {
		t.Errorf("client epoch: got %d, want %d (the session was not resumed)", got, epoch)
	}
	if got := env.Server.Stats().Sessions; got != 1 {
		t.Errorf("server sessions: got %d, want 1", got)
	}
	if after := hostTraffic(env); after == trafficBefore {
		t.Errorf("no file data crossed the link after the drops (%d requests before and after)", after)
	}
}

// TestLinkDroppedMidWorkload cuts the link three times while the restart
// workload writes and reads back files through a mount of each mode: the
// host session is resumed, no request fails (each is answered exactly
// once across reconnects), and every file is whole on the host, in
// delegated mode once written back.
func TestLinkDroppedMidWorkload(t *testing.T) {
	for _, m := range []consistency.Mode{consistency.Consistent, consistency.Cached, consistency.Delegated} {
		t.Run(m.String(), func(t *testing.T) {
			logs := &logRecorder{t: t}
			env := harness.Start(t, harness.Options{Policy: consistency.NewPolicy(m), Logf: logs.logf})
			epoch := env.Client.Epoch()
			half, done := make(chan struct{}), make(chan workResult, 1)
			go func() { done <- runWorkload(env.Mountpoint, half) }()
			<-half
			before := hostTraffic(env)
			var drops sync.WaitGroup
			drops.Add(1)
			dropLink(env.Client, &drops)
			var res workResult
			select {
			case res = <-done:
			case <-time.After(3 * time.Minute):
				t.Fatalf("workload not done 3 minutes after the link drops")
			}
			for _, err := range append(res.retried, res.failures...) {
				t.Errorf("workload: %v", err)
			}
			if failed := env.FS.WriteBack(); len(failed) > 0 {
				t.Errorf("write-back failures: %+v", failed)
			}
			checkHostFiles(t, env.Export)
			checkResumed(t, env, logs, epoch, before)
		})
	}
}

// hostTraffic counts the requests that carried file data to or from the
// host: reads through a handle or by node (a lazily opened file:
// OpReadNode), and write-back batches (OpApply: a delegated subtree
// reads back what it wrote from its own copy until the host has it).
func hostTraffic(env *harness.Env) uint64 {
	return env.Client.Stats.Requests(upstream.OpRead) + env.Client.Stats.Requests(upstream.OpReadNode) +
		env.Client.Stats.Requests(upstream.OpApply)
}

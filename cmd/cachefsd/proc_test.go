//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fdCount returns how many fds process pid has open.
func fdCount(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// procField returns the first number of a line of /proc/PID/FILE that
// starts with key, e.g. ("status", "VmHWM:") in kB.
func procField(t *testing.T, pid int, file, key string) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			n, err := strconv.Atoi(strings.Fields(rest)[0])
			if err != nil {
				t.Fatalf("%s of /proc/%d/%s: %v", key, pid, file, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/%s", key, pid, file)
	return 0
}

// openFileLimit returns process pid's soft limit on open files.
func openFileLimit(t *testing.T, pid int) int {
	return procField(t, pid, "limits", "Max open files")
}

// fdSampler records the most fds a process had open, sampled every
// 20ms until stop.
type fdSampler struct {
	stopc   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex // protects the following
	max     int
	samples int
}

func sampleFDs(pid int) *fdSampler {
	s := &fdSampler{stopc: make(chan struct{})}
	s.wg.Add(1)
	go s.loop(pid)
	return s
}

func (s *fdSampler) loop(pid int) {
	defer s.wg.Done()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if n, err := fdCount(pid); err == nil {
			s.mu.Lock()
			s.max, s.samples = max(s.max, n), s.samples+1
			s.mu.Unlock()
		}
		select {
		case <-s.stopc:
			return
		case <-tick.C:
		}
	}
}

// stop ends sampling and returns the maximum and the number of samples.
func (s *fdSampler) stop() (maxFDs, samples int) {
	close(s.stopc)
	s.wg.Wait()
	return s.max, s.samples
}

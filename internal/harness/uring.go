package harness

import (
	"os"
	"sync"
	"testing"

	"github.com/cachefs/cachefs/internal/fuseuring"
)

// EnableURing turns on FUSE over io_uring in the fuse module for the
// test, as root, and back to what it was after the last test that asked
// for it; it skips the test where the kernel cannot serve a mount over
// io_uring.
func EnableURing(t testing.TB) {
	t.Helper()
	uringMu.Lock()
	defer uringMu.Unlock()
	if uringUsers == 0 {
		old, err := os.ReadFile(uringParam)
		if err != nil {
			t.Skipf("no FUSE over io_uring in this kernel: %v", err)
		}
		if err := os.WriteFile(uringParam, []byte("Y"), 0); err != nil {
			t.Skipf("cannot turn on FUSE over io_uring: %v", err)
		}
		uringOld = old
	}
	uringUsers++
	t.Cleanup(func() {
		uringMu.Lock()
		defer uringMu.Unlock()
		if uringUsers--; uringUsers == 0 {
			os.WriteFile(uringParam, uringOld, 0)
		}
	})
	if err := fuseuring.Supported(); err != nil {
		t.Skipf("FUSE over io_uring: %v", err)
	}
}

const uringParam = "/sys/module/fuse/parameters/enable_uring"

var (
	uringMu    sync.Mutex // protects the following
	uringUsers int
	uringOld   []byte
)

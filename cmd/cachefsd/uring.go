//go:build linux

package main

import (
	"fmt"
	"log"
	"os"

	"github.com/cachefs/cachefs/internal/fuseuring"
)

// The kernel's requests reach the guest over FUSE over io_uring where
// the kernel offers it (a queue per CPU, answered on the CPU that asked:
// a round trip of 11-14 us against 14-35 us over /dev/fuse on a 2-CPU
// VM, benchmarks/cmd/fuse-rtt; a kernel untar in half the time), and
// over /dev/fuse otherwise. The fuse module's enable_uring parameter
// gates it (off by default in Linux 6.14+):
//
//	--uring auto  the rings if enable_uring is on, else /dev/fuse (the default)
//	--uring on    turn enable_uring on if it is off (root), or fail
//	--uring off   /dev/fuse
//
// The parameter only lets servers ask for rings; it changes nothing for
// FUSE servers that do not. ctl stats names the transport, and why it is
// not io_uring.
//
// A request that waits (for the host, a lock, write-back) no longer holds
// up the requests behind it from its CPU: the queue is handed to another
// thread after 1-2 ms (internal/fuseuring, Handoff), which is what kept
// io_uring opt-in before (TestGuestKilledDelegated hung in a CI dry run
// when its fsync waited for a stopped host and the test's next request
// queued behind it; TestURingHostStopped checks that case).

const enableURing = "/sys/module/fuse/parameters/enable_uring"

// defaultURing is --uring's default.
const defaultURing = "auto"

// useURing reports whether to serve the mount over io_uring, and if not,
// why (ctl stats shows it).
func (g *guestFlags) useURing() (bool, string, error) {
	switch g.uring {
	case "off":
		return false, "--uring off", nil
	case "auto":
		if err := fuseuring.Supported(); err != nil {
			log.Printf("cachefsd: serving the kernel over /dev/fuse: %v", err)
			return false, err.Error(), nil
		}
		return true, "", nil
	case "on":
		if fuseuring.Supported() != nil {
			os.WriteFile(enableURing, []byte("Y"), 0) // as root; Supported says why if not
		}
		if err := fuseuring.Supported(); err != nil {
			return false, "", fmt.Errorf("--uring on: %w", err)
		}
		return true, "", nil
	}
	return false, "", fmt.Errorf("--uring %q: want auto, on or off", g.uring)
}

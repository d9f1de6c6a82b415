package main

import (
	"fmt"
	"log"
	"os"

	"github.com/cachefs/cachefs/internal/fuseuring"
)

// The kernel's requests reach the guest over /dev/fuse, or, opted into,
// over FUSE over io_uring (a queue per CPU, answered on the CPU that
// asked: a round trip of 12-14 us against 35 us over /dev/fuse on a
// 2-CPU VM, benchmarks/cmd/fuse-rtt; a kernel untar in half the time).
// The fuse module's enable_uring parameter gates it (off by default in
// Linux 6.14+):
//
//	--uring off   /dev/fuse (the default)
//	--uring auto  use the rings if enable_uring is on
//	--uring on    turn enable_uring on if it is off (root), or fail
//
// The parameter only lets servers ask for rings; it changes nothing for
// FUSE servers that do not.
//
// Not the default yet, for one limit: a queue's thread answers its
// requests one after the other, so a request that waits for the host (an
// fsync in a delegated subtree while the host is stopped, any call of a
// consistent one on a slow link) holds up every later request from that
// CPU. TestGuestKilledDelegated hung so once in two CI dry runs: its
// fsync waited for a stopped host and the test's next request queued
// behind it. Only blocking locks are answered off the queue's thread
// (internal/fuseuring); requests that may wait for the host need the
// same before the rings can be the default.

const enableURing = "/sys/module/fuse/parameters/enable_uring"

// useURing reports whether to serve the mount over io_uring.
func (g *guestFlags) useURing() (bool, error) {
	switch g.uring {
	case "off":
		return false, nil
	case "auto":
		if err := fuseuring.Supported(); err != nil {
			log.Printf("cachefsd: serving the kernel over /dev/fuse: %v", err)
			return false, nil
		}
		return true, nil
	case "on":
		if fuseuring.Supported() != nil {
			os.WriteFile(enableURing, []byte("Y"), 0) // as root; Supported says why if not
		}
		if err := fuseuring.Supported(); err != nil {
			return false, fmt.Errorf("--uring on: %w", err)
		}
		return true, nil
	}
	return false, fmt.Errorf("--uring %q: want auto, on or off", g.uring)
}

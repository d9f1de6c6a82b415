// Command fuse-rtt measures the round trip of one FUSE request answered
// from memory (getxattr of a missing name on the root of a trivial
// go-fuse file system), over /dev/fuse and over FUSE-over-io_uring.
//
// Over /dev/fuse the kernel wakes whichever server thread waits in
// read(2), often on the other CPU; over io_uring it queues the request
// to the ring of the CPU the caller runs on (one queue per CPU), and
// that queue's thread here is pinned to that CPU. The difference bounds
// what cachefs would gain by serving the kernel over io_uring (a
// kernel untar sends about ten such requests per file).
//
//	fuse-rtt -n 50000            # /dev/fuse
//	fuse-rtt -n 50000 -uring     # io_uring; needs root and
//	                             # /sys/module/fuse/parameters/enable_uring = Y
//
// The ring side is internal/fuseuring, which cachefs mounts use with
// --uring.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/cachefs/cachefs/internal/fuseuring"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// rttFS answers the requests the measurement sends.
type rttFS struct{ fuse.RawFileSystem }

func (rttFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if in.NodeId != fuse.FUSE_ROOT_ID {
		return fuse.ENOENT
	}
	out.Mode, out.Nlink, out.Ino = syscall.S_IFDIR|0o755, 2, 1
	return fuse.OK
}

func (rttFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	return fuse.ENOENT
}

func (rttFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	return 0, fuse.ENOATTR
}

func main() {
	useRing := flag.Bool("uring", false, "serve the kernel over FUSE-over-io_uring")
	n := flag.Int("n", 20000, "requests to time")
	flag.Parse()
	if err := run(*useRing, *n); err != nil {
		log.Fatal(err)
	}
}

func run(useRing bool, n int) error {
	dir, err := os.MkdirTemp("", "fuse-rtt")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	fs := rttFS{fuse.NewDefaultRawFileSystem()}
	srv, err := mount(fs, dir, useRing)
	if err != nil {
		return err
	}
	defer srv.Unmount()
	lat := measure(dir, n)
	fmt.Printf("transport %s, %d getxattr: mean %v, median %v, p90 %v, p99 %v\n",
		transport(useRing), n, mean(lat), lat[n/2], lat[n*9/10], lat[n*99/100])
	return nil
}

func transport(useRing bool) string {
	if useRing {
		return "io_uring"
	}
	return "/dev/fuse"
}

// mount mounts fs at dir, over the rings with useRing.
func mount(fs fuse.RawFileSystem, dir string, useRing bool) (*fuse.Server, error) {
	opts := &fuse.MountOptions{DirectMount: true, FsName: "fuse-rtt", Name: "fuse-rtt"}
	return fuseuring.Mount(fs, dir, opts, useRing, fuseuring.Options{Logf: log.Printf})
}

// measure times n getxattr calls on dir, sorted.
func measure(dir string, n int) []time.Duration {
	buf := make([]byte, 64)
	lat := make([]time.Duration, n)
	for i := range lat {
		t := time.Now()
		unix.Getxattr(dir, "user.fuse-rtt", buf)
		lat[i] = time.Since(t)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat
}

func mean(lat []time.Duration) time.Duration {
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	return sum / time.Duration(len(lat))
}

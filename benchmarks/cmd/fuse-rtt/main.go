// Command fuse-rtt measures the round trip of one FUSE request answered
// from memory, over /dev/fuse and over FUSE-over-io_uring.
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
//	fuse-rtt -op getattr -dir /mnt/cached/dir   # an existing mount
//
// -op picks the request, each sent once per call:
//
//	getxattr  getxattr(DIR, "user.fuse-rtt"), a name it lacks
//	getattr   statx(DIR, AT_STATX_FORCE_SYNC): a GETATTR
//	lookup    lstat of a missing name never looked up before: a LOOKUP
//	relookup  fstatat of each name in DIR, after dropping the kernel's
//	          dentries (echo 2 > /proc/sys/vm/drop_caches): a LOOKUP of
//	          a name the file system knows (on its own mount, new names
//	          it answers for)
//	read      pread of 4 KiB of DIR/rtt-file after dropping its pages: a READ
//
// Without -dir it mounts a trivial go-fuse file system that answers
// these from memory (the floor of any go-fuse file system over the
// transport); with -dir it times the mount DIR is in (cachefs, say:
// `cachefsd local` on a cached subtree, DIR warmed first), whose
// transport is its own. read needs DIR/rtt-file of at least 4 KiB.
//
// The ring side is internal/fuseuring, which cachefs mounts use by
// default where the kernel offers it.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"time"

	"github.com/cachefs/cachefs/internal/fuseuring"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	useRing := flag.Bool("uring", false, "serve the kernel over FUSE-over-io_uring (own mount only)")
	n := flag.Int("n", 20000, "requests to time")
	op := flag.String("op", "getxattr", "request: getxattr, getattr, lookup, relookup or read")
	dir := flag.String("dir", "", "time this directory of an existing mount instead of mounting one")
	perm := flag.Bool("default-permissions", false, "own mount: let the kernel check permissions (default_permissions), as cachefs's mounts do")
	flag.Parse()
	call, ok := ops[*op]
	if !ok {
		log.Fatalf("-op %q: want getxattr, getattr, lookup, relookup or read", *op)
	}
	if err := run(*dir, *useRing, *perm, *op, call, *n); err != nil {
		log.Fatal(err)
	}
}

func run(dir string, useRing, perm bool, op string, call opFunc, n int) error {
	what, own := "the mount of "+dir, dir == ""
	if own {
		d, srv, err := mountOwn(useRing, perm)
		if err != nil {
			return err
		}
		defer os.Remove(d)
		defer srv.Unmount()
		dir, what = d, "transport "+transport(useRing)
	}
	lat, err := measure(dir, own, call, n)
	if err != nil {
		return err
	}
	fmt.Printf("%s, %d %s: mean %v, median %v, p90 %v, p99 %v\n",
		what, n, op, mean(lat), lat[n/2], lat[n*9/10], lat[n*99/100])
	return nil
}

func transport(useRing bool) string {
	if useRing {
		return "io_uring"
	}
	return "/dev/fuse"
}

// mountOwn mounts an rttFS on a new directory, over the rings with
// useRing, with default_permissions with perm.
func mountOwn(useRing, perm bool) (string, *fuse.Server, error) {
	dir, err := os.MkdirTemp("", "fuse-rtt")
	if err != nil {
		return "", nil, err
	}
	opts := &fuse.MountOptions{DirectMount: true, FsName: "fuse-rtt", Name: "fuse-rtt"}
	if perm {
		opts.Options = []string{"default_permissions"}
	}
	srv, err := fuseuring.Mount(rttFS{fuse.NewDefaultRawFileSystem()}, dir, opts, useRing, fuseuring.Options{Logf: log.Printf})
	if err != nil {
		os.Remove(dir)
		return "", nil, err
	}
	return dir, srv, nil
}

// measure times n calls on dir, sorted.
func measure(dir string, own bool, call opFunc, n int) ([]time.Duration, error) {
	c, err := call(dir, own)
	if err != nil {
		return nil, err
	}
	defer c.close()
	lat := make([]time.Duration, n)
	for i := range lat {
		t := time.Now()
		if err := c.do(i); err != nil {
			return nil, err
		}
		lat[i] = time.Since(t)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat, nil
}

func mean(lat []time.Duration) time.Duration {
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	return sum / time.Duration(len(lat))
}

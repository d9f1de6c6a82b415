// Command fuse-floor mounts the least a FUSE file system can be that
// still takes a kernel untar: every request is answered from memory by
// a go-fuse RawFileSystem that does no other work, and file contents
// pass through (FOPEN_PASSTHROUGH) to backing files in a scratch
// directory, as cachefs's delegated staging files do. Nothing is
// journaled or written back.
//
// What a workload takes on this mount is the floor of what it can take
// on any go-fuse file system on this machine, cachefs included: the
// kernel's requests and their round trips, and the data, alone.
//
//	fuse-floor [-uring] [-backing shared|file] -scratch DIR MOUNTPOINT
//	fuse-floor [-uring] [-noopen] [-noxattr] -seed DIR -scratch DIR MOUNTPOINT
//
// It serves until SIGINT or SIGTERM, then prints the requests it
// answered by opcode. -backing shared passes every file through to one
// backing file (no guest disk work per file at all); file (the default)
// creates one backing file per created file, as cachefs does. -seed
// serves a copy of a host tree, read-only (seed.go).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/cachefs/cachefs/internal/fuseuring"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	useRing := flag.Bool("uring", false, "serve the kernel over FUSE-over-io_uring")
	backing := flag.String("backing", "file", "shared: one backing file for all; file: one per created file")
	scratch := flag.String("scratch", "", "directory for backing files (required)")
	seedDir := flag.String("seed", "", "start with this host tree's names and attributes; reads come from its files")
	noOpen := flag.Bool("noopen", false, "answer OPEN, OPENDIR and FLUSH ENOSYS (the kernel opens alone)")
	noXattr := flag.Bool("noxattr", false, "answer the xattr requests ENOSYS (no xattrs)")
	flag.Parse()
	if flag.NArg() != 1 || *scratch == "" || (*backing != "shared" && *backing != "file") {
		fmt.Fprintln(os.Stderr, "usage: fuse-floor [-uring] [-backing shared|file] -scratch DIR MOUNTPOINT")
		os.Exit(2)
	}
	fs := newFloorFS(*scratch, *backing == "shared")
	if *seedDir != "" {
		if err := fs.seed(*seedDir); err != nil {
			log.Fatal(err)
		}
	}
	var raw fuse.RawFileSystem = fs
	if *noOpen {
		raw = noOpenFS{fs}
	}
	if *noXattr {
		raw = noXattrFS{raw}
	}
	srv, err := mount(raw, flag.Arg(0), *useRing, *seedDir == "")
	if err != nil {
		log.Fatal(err)
	}
	fs.srv = srv
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	srv.Unmount()
	fs.report(os.Stdout)
}

// mount mounts fs at dir with cachefs's kernel options, so that the
// kernel asks what it asks of cachefs, over either transport; locks are
// the guest kernel's unless forwarded, as on cachefs's cached connection.
func mount(fs fuse.RawFileSystem, dir string, useRing, forwardLocks bool) (*fuse.Server, error) {
	opts := &fuse.MountOptions{DirectMount: true, FsName: "fuse-floor", Name: "fuse-floor",
		Options: []string{"default_permissions"}, MaxWrite: 1 << 20, MaxReadAhead: 1 << 20,
		MaxBackground: 64, EnableLocks: forwardLocks,
		ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_ATOMIC_O_TRUNC}
	return fuseuring.Mount(fs, dir, opts, useRing, fuseuring.Options{Logf: log.Printf})
}

func (fs *floorFS) report(w *os.File) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	type kv struct {
		op string
		n  uint64
	}
	var all []kv
	var total uint64
	for op, n := range fs.counts {
		all = append(all, kv{op, n})
		total += n
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	fmt.Fprintf(w, "requests %d:", total)
	for _, e := range all {
		fmt.Fprintf(w, " %s %d", e.op, e.n)
	}
	fmt.Fprintln(w)
}

// Command loopback mounts a directory through go-fuse's loopback file
// system: the "FUSE cost alone" baseline of the benchmarks. Every
// request goes from the kernel to this process and on to the directory,
// with the kernel caching entries and attributes for --timeout.
//
//	loopback [--timeout 1s] [--passthrough] MOUNTPOINT DIR
//
// FUSE passthrough, which go-fuse enables by default as root on Linux
// 6.9 and later, lets reads and writes of open files bypass the daemon.
// It is off here unless --passthrough is given, so that data, like
// metadata, pays the FUSE round trip as it does in cachefs.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	timeout := flag.Duration("timeout", time.Second, "kernel entry and attribute timeout (libfuse's default is 1s)")
	passthrough := flag.Bool("passthrough", false, "let file data bypass the daemon (FUSE passthrough)")
	debug := flag.Bool("debug", false, "log every request")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: loopback [--timeout D] [--passthrough] MOUNTPOINT DIR")
		os.Exit(2)
	}
	root, err := newRoot(flag.Arg(1), *passthrough)
	if err != nil {
		log.Fatalf("loopback: %v", err)
	}
	opts := &fs.Options{
		AttrTimeout:     timeout,
		EntryTimeout:    timeout,
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			DirectMount: os.Geteuid() == 0,
			Debug:       *debug,
			FsName:      flag.Arg(1),
			Name:        "loopback",
		},
	}
	server, err := fs.Mount(flag.Arg(0), root, opts)
	if err != nil {
		log.Fatalf("loopback: mount: %v", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		server.Unmount()
	}()
	server.Wait()
}

// newRoot builds the loopback root; without passthrough every node is
// wrapped so that its open files refuse passthrough.
func newRoot(dir string, passthrough bool) (fs.InodeEmbedder, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return nil, err
	}
	r := &fs.LoopbackRoot{Path: dir, Dev: uint64(st.Dev)}
	if passthrough {
		r.RootNode = &fs.LoopbackNode{RootData: r}
	} else {
		r.RootNode = &node{&fs.LoopbackNode{RootData: r}}
	}
	return r.RootNode, nil
}

// node is a loopback node whose files refuse passthrough.
type node struct{ *fs.LoopbackNode }

var _ = (fs.NodeWrapChilder)((*node)(nil))
var _ = (fs.NodeOpener)((*node)(nil))
var _ = (fs.NodeCreater)((*node)(nil))

func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	if ln, ok := ops.(*fs.LoopbackNode); ok {
		return &node{ln}
	}
	return ops
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return noPassthrough(fh), fl, errno
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, noPassthrough(fh), fl, errno
}

// file is a loopback file that declines passthrough.
type file struct{ *fs.LoopbackFile }

func (f *file) PassthroughFd() (int, bool) { return -1, false }

func noPassthrough(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return &file{lf}
	}
	return fh
}

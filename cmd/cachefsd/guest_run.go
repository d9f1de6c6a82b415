package main

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// runGuest serves the control socket and waits until the mount ends,
// by a signal (which unmounts) or by an external umount.
func runGuest(fs *cachefs.FS, srv *fuse.Server, ctlPath string, stop func() error) error {
	l, err := upstream.Listen("unix://" + ctlPath)
	if err != nil {
		stop()
		return fmt.Errorf("control socket: %w", err)
	}
	defer os.Remove(ctlPath)
	defer l.Close()
	go fs.ServeControl(l)
	go stopOnSignal(func() {
		if failed := fs.WriteBack(); len(failed) > 0 {
			log.Printf("cachefsd: %d changes could not be written back: %+v", len(failed), failed)
		}
		if err := stop(); err != nil {
			log.Printf("cachefsd: unmount: %v", err)
		}
	})
	srv.Wait()
	return nil
}

func stopOnSignal(stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	<-ch
	stop()
}

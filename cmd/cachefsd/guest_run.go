//go:build linux

package main

import (
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/upstream"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Stopping a guest daemon, one step per SIGTERM or SIGINT:
//
//  1. write delegated changes back, then unmount; if the mount is busy,
//     log who holds it (holders.go) and keep serving;
//  2. write back what came since, then detach the mount (MNT_DETACH):
//     it is gone from the namespace, and the daemon serves its holders
//     until the last lets go, then exits;
//  3. detach and exit at once: what is not written back stays in the
//     journal for the next daemon on the state directory.
//
// A write-back waits for the host, so a step can wait; the next signal
// starts the next step meanwhile. An external umount ends the daemon as
// well. Either way it then ends the host connection and removes the
// default state directory unless it holds changes not written back.

// errGone reports an unmount of a mount already unmounted or detached.
var errGone = errors.New("already unmounted")

// guestRun is a mounted guest daemon as run serves and stops it.
type guestRun struct {
	guest      *cachefs.Guest // immutable
	fs         *cachefs.FS    // immutable: the guest's main connection
	srv        *fuse.Server   // immutable
	mnt        string         // immutable: the absolute mountpoint
	source     string         // immutable: what is mounted, for the log
	disconnect func()         // ends the host connection; run once, by done

	once sync.Once
	mu   sync.Mutex // protects gone
	gone bool       // unmounted or detached
}

// run serves the mount of source at mnt, and its control socket, until
// the mount ends; disconnect then ends the host connection.
func (g *guestFlags) run(guest *cachefs.Guest, srv *fuse.Server, mnt, source string, disconnect func()) error {
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return err
	}
	r := &guestRun{guest: guest, fs: guest.Main(), srv: srv, mnt: abs, source: source, disconnect: disconnect}
	if g.rootOverlay() {
		r.delegateRoot()
	}
	err = r.serve(g.ctl, g.metrics)
	log.Printf("cachefsd: %s is unmounted", r.mnt)
	r.closeGuest()
	r.done()
	g.removeStateDir(r.fs, mnt)
	return err
}

// delegateRoot registers the mount root delegated (rootOverlay), and
// logs whether it is an overlay. An outside umount of the mountpoint
// then takes the overlay away, not the main mount under it: the daemon
// stops as at a first signal (writes back, unmounts the main mount).
func (r *guestRun) delegateRoot() {
	if _, err := r.guest.Register("", consistency.Delegated); err != nil {
		log.Printf("cachefsd: delegating the mount root: %v", err)
		return
	}
	for _, o := range r.fs.Stats().Overlays {
		if o.Path == "" {
			log.Printf("cachefsd: the mount root is delegated: an overlay over %s, its upper directory in the state directory", r.mnt)
			err := r.guest.OnUnmount(r.mnt, func() {
				log.Printf("cachefsd: the overlay over %s was unmounted", r.mnt)
				r.stop()
			})
			if err != nil {
				log.Printf("cachefsd: not watching the overlay over %s: %v", r.mnt, err)
			}
			return
		}
	}
	log.Printf("cachefsd: the mount root is FUSE delegated, not an overlay: %s", r.fs.Stats().OverlaysOff)
}

// closeGuest takes the registrations' views and the other connections
// down: the main mount cannot go while they hang on it.
func (r *guestRun) closeGuest() {
	if err := r.fs.CloseOverlays(); err != nil {
		log.Printf("cachefsd: overlays: %v", err)
	}
	if err := r.guest.Close(); err != nil {
		log.Printf("cachefsd: %v", err)
	}
}

// serve serves the control socket, and the metrics if asked, and waits
// until the mount ends.
func (r *guestRun) serve(ctl, metrics string) error {
	sigs := make(chan os.Signal, 3) // caught before the socket, which tells the mount is up
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	l, err := r.listen(ctl, metrics)
	if err != nil {
		r.closeGuest()
		if r.unmount(0) != nil {
			r.unmount(unix.MNT_DETACH)
		}
		r.srv.Wait()
		return err
	}
	defer l.Close() // which removes the socket
	go r.guest.ServeControl(l)
	go r.onSignals(sigs)
	notifyReady() // first: a mount helper's daemon then logs to its log
	log.Printf("cachefsd: ready: %s mounted at %s, control socket %s", r.source, r.mnt, ctl)
	r.srv.Wait()
	return nil
}

// listen listens on the control socket and, if asked, serves the
// metrics on their address.
func (r *guestRun) listen(ctl, metrics string) (net.Listener, error) {
	if metrics != "" {
		ml, err := net.Listen("tcp", metrics)
		if err != nil {
			return nil, fmt.Errorf("--metrics: %w", err)
		}
		go serveMetrics(ml, r.fs)
	}
	l, err := upstream.Listen("unix://" + ctl)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return l, nil
}

// done ends the host connection, once.
func (r *guestRun) done() { r.once.Do(r.disconnect) }

// onSignals runs the next stop step on each signal.
func (r *guestRun) onSignals(sigs <-chan os.Signal) {
	steps := []func(){r.stop, r.detach, r.exit}
	for i := 0; ; i++ {
		<-sigs
		if i == 0 {
			notifySystemd("STOPPING=1")
		}
		go steps[min(i, len(steps)-1)]()
	}
}

// stop is the first step: write back, then unmount or say who holds
// the mount.
func (r *guestRun) stop() {
	r.writeBack("unmounting")
	r.closeGuest()
	err := r.unmount(0)
	for delay := 5 * time.Millisecond; errors.Is(err, unix.EBUSY) && delay < time.Second; delay *= 2 {
		time.Sleep(delay) // a closing file may hold the mount for a moment
		err = r.unmount(0)
	}
	switch {
	case err == nil:
		// With the host gone, requests in flight would hold the end of
		// the mount up to the reconnect bound: fail them after a grace
		// period.
		time.AfterFunc(5*time.Second, r.done)
		return
	case errors.Is(err, errGone):
		return
	}
	log.Printf("cachefsd: unmount %s: %v; still serving it. Stop its users, or signal again to detach it (lazy unmount)", r.mnt, err)
	for _, h := range holders(r.mnt) {
		log.Printf("cachefsd:   held by %s", h)
	}
}

// detach is the second step: write back, then detach the mount.
func (r *guestRun) detach() {
	r.writeBack("detaching")
	held := len(holders(r.mnt)) // after the detach their paths no longer show the mountpoint
	r.closeGuest()
	if err := r.unmount(unix.MNT_DETACH); err != nil {
		if !errors.Is(err, errGone) {
			log.Printf("cachefsd: detaching %s: %v", r.mnt, err)
		}
		return
	}
	log.Printf("cachefsd: %s detached; serving it until its last holder (of %d) lets go; signal again to exit now", r.mnt, held)
}

// exit is the last step: detach and exit now.
func (r *guestRun) exit() {
	r.closeGuest()
	r.unmount(unix.MNT_DETACH)
	log.Printf("cachefsd: exiting now; changes not written back stay in the journal")
	os.Exit(1)
}

// writeBack writes delegated changes back before the mount goes.
func (r *guestRun) writeBack(then string) {
	log.Printf("cachefsd: stopping: writing delegated changes back, then %s %s", then, r.mnt)
	if failed := r.fs.WriteBack(); len(failed) > 0 {
		log.Printf("cachefsd: %d changes could not be written back: %+v", len(failed), failed)
	}
}

// unmount unmounts the mount (flags 0) or detaches it (MNT_DETACH),
// unless that was done.
func (r *guestRun) unmount(flags int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return errGone
	}
	err := unix.Unmount(r.mnt, flags)
	if err == unix.EPERM {
		err = fusermountU(r.mnt, flags) // a user's mount, made by fusermount
	}
	r.gone = err == nil
	return err
}

// fusermountU unmounts a mount of an ordinary user through fusermount3.
func fusermountU(mnt string, flags int) error {
	args := []string{"-u", mnt}
	if flags&unix.MNT_DETACH != 0 {
		args = []string{"-u", "-z", mnt}
	}
	out, err := exec.Command("fusermount3", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("fusermount3 %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/cachefs/cachefs/invalidation"
	"github.com/cachefs/cachefs/upstream"
	"github.com/cachefs/cachefs/upstream/hostfs"
)

// serveFlags are serve's flags.
type serveFlags struct {
	export, listen string
	ro             bool
	maxFDs         int
	acc            accessFlags
	watcher        string
	backend        string
}

// newServeFlags returns serve's flag set, which fills sf.
func newServeFlags() (*flag.FlagSet, *serveFlags) {
	fl := flag.NewFlagSet("serve", flag.ExitOnError)
	sf := &serveFlags{}
	fl.StringVar(&sf.export, "export", "", "directory to export (required)")
	fl.StringVar(&sf.listen, "listen", "", "address to listen on (required)")
	fl.BoolVar(&sf.ro, "read-only", false, "refuse every change (guests mount it read-only)")
	fl.IntVar(&sf.maxFDs, "max-fds", 0, "bound on cached fds (0: half the open-file limit)")
	sf.acc.register(fl)
	fl.StringVar(&sf.watcher, "watcher", "auto", "how watched subtrees are watched: auto, inotify or fanotify (macOS: fsevents)")
	fl.StringVar(&sf.backend, "backend", "auto", "how host inodes are identified: auto ($CACHEFS_BACKEND, else handles where they work), handles or portable (macOS's: by inode through the parent directory)")
	setUsage(fl, "serve --export DIR --listen ADDR [flags]")
	return fl, sf
}

func serve(args []string) error {
	fl, sf := newServeFlags()
	fl.Parse(args)
	export, listen, acc := &sf.export, &sf.listen, &sf.acc
	if *export == "" || *listen == "" {
		return fmt.Errorf("serve needs --export and --listen")
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("serve takes no arguments, got %q (flags go first)", fl.Args())
	}
	secret, cids, err := acc.check(*listen)
	if err != nil {
		return err
	}
	kind, err := invalidation.ParseKind(sf.watcher)
	if err != nil {
		return err
	}
	backend, err := hostfs.ParseKind(sf.backend)
	if err != nil {
		return err
	}
	srv, err := upstream.NewServer(upstream.ServerOptions{Export: *export, ReadOnly: sf.ro, MaxFDs: sf.maxFDs,
		Secret: secret, AllowSetID: acc.allowSetID, AllowDevices: acc.allowDevs,
		Watcher: kind, Backend: backend})
	if err != nil {
		return err
	}
	l, err := upstream.Listen(*listen)
	if err != nil {
		return err
	}
	if cids != nil {
		l = upstream.AllowCIDs(l, cids, log.Printf)
	}
	log.Printf("cachefsd: exporting %s on %s (nodes: %v)", *export, *listen, srv.Stats().Backend)
	if w := srv.Stats().Watch; w.Fallback != "" {
		log.Printf("cachefsd: watching with %v (fanotify unavailable: %s)", w.Kind, w.Fallback)
	} else {
		log.Printf("cachefsd: watching with %v", w.Kind)
	}
	stopOnSignal(func() { notifySystemd("STOPPING=1"); l.Close(); srv.Close() })
	notifySystemd("READY=1") // the socket accepts: connections queue until Serve takes them
	return srv.Serve(l)
}

// stopOnSignal runs stop on the first SIGINT or SIGTERM. The signals
// are caught when it returns: one right after readiness is told is a
// clean stop too, not the default death.
func stopOnSignal(stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ch
		stop()
	}()
}

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
)

func serve(args []string) error {
	fl := flag.NewFlagSet("serve", flag.ExitOnError)
	export := fl.String("export", "", "directory to export (required)")
	listen := fl.String("listen", "", "address to listen on (required)")
	ro := fl.Bool("read-only", false, "refuse every change")
	maxFDs := fl.Int("max-fds", 0, "bound on cached fds (0: half the open-file limit)")
	var acc accessFlags
	acc.register(fl)
	watcher := fl.String("watcher", "auto", "how watched subtrees are watched: auto, inotify or fanotify")
	fl.Parse(args)
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
	kind, err := invalidation.ParseKind(*watcher)
	if err != nil {
		return err
	}
	srv, err := upstream.NewServer(upstream.ServerOptions{Export: *export, ReadOnly: *ro, MaxFDs: *maxFDs,
		Secret: secret, AllowSetID: acc.allowSetID,
		Watcher: kind})
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
	log.Printf("cachefsd: exporting %s on %s", *export, *listen)
	if w := srv.Stats().Watch; w.Fallback != "" {
		log.Printf("cachefsd: watching with %v (fanotify unavailable: %s)", w.Kind, w.Fallback)
	} else {
		log.Printf("cachefsd: watching with %v", w.Kind)
	}
	go stopOnSignal(func() { l.Close(); srv.Close() })
	return srv.Serve(l)
}

func stopOnSignal(stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	<-ch
	stop()
}

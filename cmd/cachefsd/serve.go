package main

import (
	"flag"
	"fmt"
	"log"

	"github.com/cachefs/cachefs/upstream"
)

func serve(args []string) error {
	fl := flag.NewFlagSet("serve", flag.ExitOnError)
	export := fl.String("export", "", "directory to export (required)")
	listen := fl.String("listen", "", "address to listen on (required)")
	ro := fl.Bool("read-only", false, "refuse every change")
	maxFDs := fl.Int("max-fds", 0, "bound on cached fds (0: half the open-file limit)")
	fl.Parse(args)
	if *export == "" || *listen == "" {
		return fmt.Errorf("serve needs --export and --listen")
	}
	srv, err := upstream.NewServer(upstream.ServerOptions{Export: *export, ReadOnly: *ro, MaxFDs: *maxFDs})
	if err != nil {
		return err
	}
	l, err := upstream.Listen(*listen)
	if err != nil {
		return err
	}
	log.Printf("cachefsd: exporting %s on %s", *export, *listen)
	go stopOnSignal(func() { l.Close(); srv.Close() })
	return srv.Serve(l)
}

package main

import (
	"fmt"
	"os"
)

const usage = `usage:
  cachefsd serve --export DIR --listen ADDR [--read-only] [--max-fds N]
                 [--secret-file PATH] [--insecure-tcp] [--allow-cid CID,...] [--allow-setid]
                 [--watcher auto|inotify|fanotify]
  cachefsd mount --upstream ADDR [--link-delay D] [--default-mode MODE] [--ctl PATH]
                 [--cache-ttl D] [--state-dir DIR] [--secret-file PATH] MOUNTPOINT
  cachefsd local --export DIR [same flags as mount] MOUNTPOINT
  cachefsd ctl [--socket PATH] stats|ping|modes
  cachefsd ctl [--socket PATH] register --mode MODE PATH
  cachefsd ctl [--socket PATH] unregister ID
  cachefsd ctl [--socket PATH] flush [PATH]

ADDR is unix:///path, tcp://host:port, vsock://cid:port or hvsock:///path:port.
A tcp host left empty (tcp://:port) is 127.0.0.1. serve refuses a tcp ADDR
without --secret-file unless --insecure-tcp is given; mount and local prove
the same secret, given by their --secret-file.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "mount":
		err = mount(os.Args[2:])
	case "local":
		err = local(os.Args[2:])
	case "ctl":
		err = ctl(os.Args[2:])
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		err = fmt.Errorf("unknown command %q\n%s", os.Args[1], usage)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cachefsd:", err)
		os.Exit(1)
	}
}

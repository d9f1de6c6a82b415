package main

import (
	"fmt"
	"os"
)

func main() {
	if isMountHelper(os.Args[0]) {
		exit(mountHelper(os.Args[1:]))
	}
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage())
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
	case "volume-plugin":
		err = volumePlugin(os.Args[2:])
	case "mount-helper":
		err = mountHelper(os.Args[2:])
	case "version", "--version", "-version":
		fmt.Println(versionString())
	case "help", "-h", "--help":
		fmt.Print(usage())
	default:
		err = fmt.Errorf("unknown command %q\n%s", os.Args[1], usage())
	}
	exit(err)
}

// exit exits, with status 1 and the error if there is one.
func exit(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "cachefsd:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

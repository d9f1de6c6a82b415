package invalidation

import "golang.org/x/sys/unix"

func gettid() int { return unix.Gettid() }

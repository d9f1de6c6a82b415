// Package harness runs both halves of cachefs in one process for the
// tests: the Pair of internal/inproc (a host server on a unix socket, a
// client and a guest mount), started on temporary directories and
// closed when the test ends (Start), with the mount's FUSE requests
// counted (Env.Kernel) and FUSE over io_uring turned on where a test
// asks for it (EnableURing).
package harness

import "github.com/cachefs/cachefs/internal/inproc"

// Options configure an Env: those of a inproc.Pair.
type Options = inproc.Options

// Env is a running server, client and mount, and the count of the
// mount's FUSE requests.
type Env struct {
	*inproc.Pair
	Kernel *KernelOps // the mount's FUSE requests
}

// Launch starts a server, connects a client and mounts.
func Launch(o Options) (*Env, error) {
	p, err := inproc.Launch(o)
	if err != nil {
		return nil, err
	}
	return &Env{Pair: p, Kernel: &KernelOps{fs: p.FS}}, nil
}

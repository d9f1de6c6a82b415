package hostfs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// NewIdentity chooses the identity for the export whose root is rootFD
// (an O_RDONLY directory fd, which open_by_handle_at needs as its mount
// fd): k, or for Auto $CACHEFS_BACKEND, else the best the platform and
// the process allow. Asked for Handles where they do not work, it
// fails.
func NewIdentity(k Kind, rootFD int) (Identity, error) {
	if k == Auto {
		if env := os.Getenv(EnvKind); env != "" {
			var err error
			if k, err = ParseKind(env); err != nil {
				return nil, fmt.Errorf("$%s: %w", EnvKind, err)
			}
		}
	}
	if k == Portable {
		return portable{}, nil
	}
	id, err := newHandles(rootFD)
	switch {
	case err == nil:
		return id, nil
	case k == Auto:
		return portable{}, nil
	default:
		return nil, fmt.Errorf("file handles: %w", err)
	}
}

// portable has no handles: the server reaches a node through its
// parent's fd and its name, checking (dev, ino).
type portable struct{}

func (portable) Kind() Kind                     { return Portable }
func (portable) Key(int, string) *Handle        { return nil }
func (portable) Open(int, *Handle) (int, error) { return -1, unix.ESTALE }

package hostfs

import (
	"bytes"
	"fmt"
)

// Kind selects how the server identifies nodes.
type Kind uint8

const (
	// Auto is $CACHEFS_BACKEND (EnvKind) if set, else Handles where
	// they work for the export and the process, else Portable.
	Auto Kind = iota
	// Handles identifies a node by file handle (Linux).
	Handles
	// Portable identifies a node by (dev, ino), reached again through
	// its parent's fd and its name: macOS's way, available everywhere.
	Portable
)

// EnvKind names the environment variable that Auto defers to: "auto",
// "handles" or "portable".
const EnvKind = "CACHEFS_BACKEND"

// Handle is a durable identity of an inode: a file handle's type and
// bytes. Nil where the identity has none.
type Handle struct {
	Type  int32
	Bytes []byte
}

// Same reports whether two handles may name one inode: they are equal,
// or either is unknown. A file handle holds the inode's generation, so
// it tells a reused inode number from the file that had it before.
func Same(a, b *Handle) bool {
	return a == nil || b == nil || a.Type == b.Type && bytes.Equal(a.Bytes, b.Bytes)
}

// Identity tells inodes apart and reaches them again.
type Identity interface {
	// Kind is Handles or Portable.
	Kind() Kind
	// Key returns the handle of name in dirfd (not followed if a
	// symlink), or nil: always with Portable, and where the inode
	// lies on another mount than the export root.
	Key(dirfd int, name string) *Handle
	// Open opens the inode h names as an O_PATH fd, with mountFD (the
	// export root) as the mount; ESTALE when it is gone. Portable has
	// no handles and returns ESTALE.
	Open(mountFD int, h *Handle) (int, error)
}

// ParseKind parses "auto", "handles" or "portable".
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if s == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown backend %q (want auto, handles or portable)", s)
}

var kindNames = [...]string{Auto: "auto", Handles: "handles", Portable: "portable"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("backend%d", k)
}

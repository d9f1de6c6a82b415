package cachefs

import (
	"github.com/cachefs/cachefs/upstream"
	lru "github.com/hashicorp/golang-lru/v2"
)

// Inode numbers of files the guest made. Such a file shows the number it
// was made with (localIno) for as long as it lives, not only while the
// kernel holds its first node: once written back, the host's inode number
// maps to it here, so that a later lookup, which makes a new node for
// the host's file, shows the same number. The map is bounded (least
// recently used numbers go first, when a guest has made more files than
// maxAliases and the kernel forgot them).

const maxAliases = 1 << 18

type inoAliases struct {
	m *lru.Cache[uint64, uint64] // host inode number -> shown number
}

func newInoAliases() inoAliases {
	m, _ := lru.New[uint64, uint64](maxAliases)
	return inoAliases{m: m}
}

// add maps host inode number ino to shown.
func (a inoAliases) add(ino, shown uint64) {
	if ino != 0 {
		a.m.Add(ino, shown)
	}
}

// remove forgets ino's number when its file goes: the host may reuse
// the number for another file, which must not show the same as a file
// the guest may still hold. (A file deleted on the host behind the
// guest's back keeps its entry until evicted: the host's reuse of its
// number for a new file then shows the old file's number.)
func (a inoAliases) remove(ino uint64) {
	if ino != 0 {
		a.m.Remove(ino)
	}
}

// shown is the inode number the guest shows for the host's ino.
func (a inoAliases) shown(ino uint64) uint64 {
	if a.m.Len() == 0 {
		return ino
	}
	if s, ok := a.m.Get(ino); ok {
		return s
	}
	return ino
}

// shownIno is the inode number the guest shows for n: the host's, except
// for files the guest made, which keep the number they were made with
// (the host's is unknown until write-back, and must not change under
// the applications that saw the first).
func (t *nodeTable) shownIno(n *node, a *upstream.Attr) uint64 {
	if n != nil && n.guestMade {
		return localIno(n)
	}
	return t.aliases.shown(a.Ino)
}

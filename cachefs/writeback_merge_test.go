package cachefs

import (
	"syscall"
	"testing"

	"github.com/cachefs/cachefs/upstream"
)

// An untar sets a file's times, owner and mode in turn: one op on the
// wire, unless the order matters.
func TestMergeSetattr(t *testing.T) {
	set := func(path string, valid uint32, mode uint32) upstream.WBOp {
		return upstream.WBOp{Kind: upstream.WBSetattr, Path: path, Valid: valid, Mode: mode,
			Uid: 7, Gid: 8, Size: 9, Atime: 10, Mtime: 11}
	}
	times := upstream.SetAtime | upstream.SetMtime
	owner := upstream.SetUid | upstream.SetGid
	for _, c := range []struct {
		name  string
		a, b  upstream.WBOp
		merge bool
	}{
		{"times then owner", set("f", times, 0), set("f", owner, 0), true},
		{"owner then plain mode", set("f", owner, 0), set("f", upstream.SetMode, 0644), true},
		{"other path", set("f", times, 0), set("g", owner, 0), false},
		{"size after times", set("f", times, 0), set("f", upstream.SetSize, 0), false},
		{"set-id mode after owner", set("f", owner, 0), set("f", upstream.SetMode, syscall.S_ISUID|0755), false},
		{"after a write", upstream.WBOp{Kind: upstream.WBWrite, Path: "f"}, set("f", times, 0), false},
	} {
		a := c.a
		if got := mergeSetattr(&a, &c.b); got != c.merge {
			t.Errorf("%s: merged %v, want %v", c.name, got, c.merge)
			continue
		}
		if c.merge && a.Valid != c.a.Valid|c.b.Valid {
			t.Errorf("%s: Valid %b, want %b", c.name, a.Valid, c.a.Valid|c.b.Valid)
		}
	}
	a, b := set("f", times, 0), set("f", upstream.SetMode|owner, 0600)
	b.Uid, b.Gid = 1, 2
	mergeSetattr(&a, &b)
	if a.Mode != 0600 || a.Uid != 1 || a.Gid != 2 || a.Mtime != 11 {
		t.Errorf("merged op %+v: want b's mode and owner, a's times", a)
	}
}

package cachefs

import (
	"testing"

	"github.com/cachefs/cachefs/upstream"
)

// kernelRef skips the name index when the node's name did not change:
// it must still index a node that another took the name from, and put
// back in byID a node that was dropped from it.
func TestKernelRefIndexes(t *testing.T) {
	tab := newNodeTable(1, 1)
	root := tab.get(rootID)
	a := tab.adopt(root, "x", 10, 1, &upstream.Attr{Ino: 10, Mode: sIFREG})
	b := tab.add(root, "x", 11, 1, &upstream.Attr{Ino: 11, Mode: sIFREG})
	if a == b {
		t.Fatal("adopt and add gave one node for two host ids")
	}
	if got := tab.child(root, "x"); got != b {
		t.Fatalf("child x = node %d, want the later, %d", got.id, b.id)
	}
	tab.kernelRef(a, root, "x")
	if got := tab.child(root, "x"); got != a {
		t.Errorf("child x after kernelRef(a) = node %d, want %d", got.id, a.id)
	}
	tab.kernelRef(a, root, "x") // unchanged: nothing to redo
	if got := tab.child(root, "x"); got != a {
		t.Errorf("child x after a second kernelRef(a) = node %d, want %d", got.id, a.id)
	}

	tab.unpin(a)
	tab.forget(a.id, 2)
	if tab.get(a.id) != nil {
		t.Fatalf("node %d still in byID with no lookups and no pins", a.id)
	}
	tab.kernelRef(a, root, "x")
	if tab.get(a.id) != a {
		t.Errorf("node %d not in byID after kernelRef", a.id)
	}
}

//go:build linux

package upstream

import (
	"strings"
	"testing"
)

// TestOpsHandlers checks the server's dispatch against the ops table:
// a handler for every op but the handshake's, none for those or for a
// number that is no op.
func TestOpsHandlers(t *testing.T) {
	for op := Op(0); op <= opCount; op++ {
		want := op > 0 && op < opCount && !op.info().handshake
		if got := handlerFor(op) != nil; got != want {
			t.Errorf("%v: handler %v, want %v", op, got, want)
		}
	}
}

// TestOpsHandlerMismatch checks that a handler whose messages or
// cancellability disagree with its row is refused at registration.
func TestOpsHandlerMismatch(t *testing.T) {
	refused := func(name string, register func()) {
		t.Helper()
		defer func() {
			r := recover()
			if s, _ := r.(string); !strings.Contains(s, "disagrees with its row") {
				t.Errorf("%s: registered (recovered %v), want refused", name, r)
			}
		}()
		register()
	}
	refused("request type", func() { on(OpGetattr, func(*session, *LookupReq, *AttrResp) error { return nil }) })
	refused("reply type", func() { on(OpGetattr, func(*session, *NodeReq, *EntryResp) error { return nil }) })
	refused("not cancellable", func() { on(OpSetlk, func(*session, *LockReq, *Empty) error { return nil }) })
	refused("cancellable", func() {
		onCancellable(OpGetlk, func(*session, <-chan struct{}, *LockReq, *LockResp) error { return nil })
	})
	refused("handshake", func() { on(OpHello, func(*session, *HelloReq, *ChallengeResp) error { return nil }) })
	refused("no op", func() { on(opCount, func(*session, *Empty, *Empty) error { return nil }) })
}

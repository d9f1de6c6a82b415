package upstream

import (
	"fmt"
	"net"
	"slices"

	"github.com/mdlayher/vsock"
)

// Access to the server by peer address. A vsock peer's context id (CID)
// is set by the hypervisor, not by the guest, so it tells which virtual
// machine connects.

// CheckPeerCID returns nil if addr, a connection's remote address, is a
// vsock peer whose CID is among cids, else the reason it is not.
func CheckPeerCID(addr net.Addr, cids []uint32) error {
	va, ok := addr.(*vsock.Addr)
	if !ok {
		return fmt.Errorf("peer %v (%T) is not a vsock peer", addr, addr)
	}
	if !slices.Contains(cids, va.ContextID) {
		return fmt.Errorf("peer CID %d is not among the allowed %v", va.ContextID, cids)
	}
	return nil
}

// AllowCIDs wraps a vsock listener: connections from a peer CID not in
// cids are closed as they are accepted, with the reason logged by logf,
// and Accept waits for the next.
func AllowCIDs(l net.Listener, cids []uint32, logf func(format string, args ...any)) net.Listener {
	return &cidListener{Listener: l, cids: slices.Clone(cids), logf: logf}
}

type cidListener struct {
	net.Listener
	cids []uint32 // immutable
	logf func(format string, args ...any)
}

func (l *cidListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := CheckPeerCID(c.RemoteAddr(), l.cids); err != nil {
			l.logf("cachefs: refused connection: %v", err)
			c.Close()
			continue
		}
		return c, nil
	}
}

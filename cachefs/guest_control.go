package cachefs

import (
	"net"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/upstream"
)

// ServeControl answers control requests on l until it is closed:
// registrations are the Guest's, the rest the main connection's.
func (g *Guest) ServeControl(l net.Listener) error {
	return upstream.AcceptLoop(l, func(c net.Conn) { serveControlConn(c, g.control) })
}

func (g *Guest) control(req *CtlRequest, resp *CtlResponse) error {
	switch req.Cmd {
	case "stats":
		st := g.Stats()
		resp.Stats = &st
	case "register":
		m, err := consistency.ParseMode(req.Mode)
		if err != nil {
			return err
		}
		p, err := g.main.relPath(req.Path)
		if err != nil {
			return err
		}
		resp.ID, err = g.Register(p, m)
		return err
	case "unregister":
		return g.Unregister(req.ID)
	case "modes":
		resp.Registrations = g.Registrations()
	default:
		return g.main.control(req, resp)
	}
	return nil
}

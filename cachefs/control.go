package cachefs

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/upstream"
)

// The control socket takes one JSON request per line and answers each
// with one JSON line. It is how `cachefsd ctl` talks to a running guest
// daemon.

// CtlRequest is a control request.
type CtlRequest struct {
	Cmd  string // stats, ping, register, unregister, modes
	Path string `json:",omitempty"`
	Mode string `json:",omitempty"`
	ID   uint64 `json:",omitempty"`
}

// CtlResponse answers a CtlRequest. Error is empty on success.
type CtlResponse struct {
	Error         string                     `json:",omitempty"`
	Stats         *Stats                     `json:",omitempty"`
	PingNs        int64                      `json:",omitempty"`
	ID            uint64                     `json:",omitempty"`
	Registrations []consistency.Registration `json:",omitempty"`
	Failures      []Failure                  `json:",omitempty"`
}

// ServeControl answers control requests on l until it is closed.
func (fs *FS) ServeControl(l net.Listener) error {
	return upstream.AcceptLoop(l, func(c net.Conn) { serveControlConn(c, fs.control) })
}

// serveControlConn answers the requests of one control connection.
func serveControlConn(c net.Conn, control func(*CtlRequest, *CtlResponse) error) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	enc := json.NewEncoder(c)
	for sc.Scan() {
		var req CtlRequest
		var resp CtlResponse
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp.Error = "bad request: " + err.Error()
		} else if err := control(&req, &resp); err != nil {
			resp.Error = err.Error()
		}
		if enc.Encode(&resp) != nil {
			return
		}
	}
}

func (fs *FS) control(req *CtlRequest, resp *CtlResponse) error {
	switch req.Cmd {
	case "stats":
		st := fs.Stats()
		resp.Stats = &st
	case "ping":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if err := fs.up.Call(ctx, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{}); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		resp.PingNs = time.Since(start).Nanoseconds()
	case "register":
		m, err := consistency.ParseMode(req.Mode)
		if err != nil {
			return err
		}
		p, err := fs.relPath(req.Path)
		if err != nil {
			return err
		}
		resp.ID = fs.Register(p, m)
	case "unregister":
		return fs.Unregister(req.ID)
	case "flush":
		failed := fs.WriteBack()
		if len(failed) > 0 {
			resp.Failures = failed
			return fmt.Errorf("%d changes could not be written back, first: %s %s: %s",
				len(failed), failed[0].Op, failed[0].Path, failed[0].Errno)
		}
	case "modes":
		resp.Registrations = fs.policy.List()
	default:
		return fmt.Errorf("unknown command %q", req.Cmd)
	}
	return nil
}

// Register registers a subtree with a mode; see consistency.Policy.
// What the new mode may not keep is dropped before it returns.
func (fs *FS) Register(path string, m consistency.Mode) uint64 {
	if id, ok := fs.registerOverlay(path, m); ok {
		return id
	}
	fs.WriteBack() // a stronger mode may not keep what delegated kept
	id := fs.policy.Register(path, m)
	fs.dropLocal()
	fs.invalidateAll()
	if err := fs.watchRegistration(id, consistency.Clean(path)); err != nil {
		fs.opts.Logf("cachefs: watching %q: %v (changes will show after the cache TTL)", path, err)
	}
	return id
}

// Unregister drops a registration.
func (fs *FS) Unregister(id uint64) error {
	if ok, err := fs.unregisterOverlay(id); ok {
		return err
	}
	reg, gone, ok := fs.policy.Unregister(id)
	if !ok {
		return fmt.Errorf("no registration %d", id)
	}
	if gone && reg.Mode.WritesBack() {
		// The container is gone: what it delegated goes to the host now.
		failed := fs.WriteBack()
		fs.dropLocal()
		if len(failed) > 0 {
			fs.invalidateAll()
			return fmt.Errorf("unregistered, but %d changes could not be written back, first: %s %s: %s",
				len(failed), failed[0].Op, failed[0].Path, failed[0].Errno)
		}
	}
	if gone {
		fs.unwatchRegistration(id)
	}
	fs.invalidateAll()
	return nil
}

// relPath turns a path given to ctl into one relative to the mount
// root: absolute paths must lie under the mountpoint.
func (fs *FS) relPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return consistency.Clean(p), nil
	}
	mnt := fs.opts.Mountpoint
	rel, err := filepath.Rel(mnt, p)
	if mnt == "" || err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not under the mountpoint %q", p, mnt)
	}
	return consistency.Clean(rel), nil
}

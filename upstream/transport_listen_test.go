package upstream_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachefs/cachefs/upstream"
)

// A unix socket a live process accepts on is refused, and the first
// listener keeps its socket and its clients.
func TestListenRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	first, err := upstream.Listen("unix://" + path)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer first.Close()
	go upstream.AcceptLoop(first, func(c net.Conn) { c.Write([]byte("first")); c.Close() })
	second, err := upstream.Listen("unix://" + path)
	if err == nil {
		second.Close()
		t.Fatalf("second Listen on a live socket succeeded, want an error")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Listen: %q, want the path and \"in use\"", err)
	}
	if got := readAll(t, path); got != "first" {
		t.Errorf("after the refused Listen, the socket answers %q, want \"first\"", got)
	}
}

// A socket file nothing accepts on (its daemon died) is replaced.
func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	l, err = upstream.Listen("unix://" + path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer l.Close()
	go upstream.AcceptLoop(l, func(c net.Conn) { c.Write([]byte("new")); c.Close() })
	if got := readAll(t, path); got != "new" {
		t.Errorf("the new socket answers %q, want \"new\"", got)
	}
}

// A path that is not a socket is neither removed nor listened on.
func TestListenRefusesNonSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := upstream.Listen("unix://" + path); err == nil {
		l.Close()
		t.Fatalf("Listen on a regular file succeeded, want an error")
	} else if !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen on a regular file: %q, want \"not a socket\"", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "keep" {
		t.Errorf("the file after Listen: %q, %v; want it kept", b, err)
	}
}

// readAll connects to the unix socket path and reads until EOF.
func readAll(t *testing.T, path string) string {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	var b [64]byte
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			break
		}
	}
	return string(b[:n])
}

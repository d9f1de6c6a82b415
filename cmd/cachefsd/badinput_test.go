//go:build linux

package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// TestBadInput: each mistake a user makes on the command line ends with
// a non-zero exit and a message that names it.
func TestBadInput(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	export, mnt := t.TempDir(), t.TempDir()
	http := httpLike(t)
	ctl := filepath.Join(dir, "ctl")
	for _, c := range []struct {
		name string
		argv []string
		want []string
	}{
		{"mountpoint missing", []string{"local", "--export", export, "--ctl", ctl, missing}, []string{missing, "does not exist"}},
		{"mountpoint a file", []string{"local", "--export", export, "--ctl", ctl, file}, []string{file, "not a directory"}},
		{"two mountpoints", []string{"local", "--export", export, "--ctl", ctl, mnt, dir}, []string{"one mountpoint", mnt + " " + dir}},
		{"flag after the mountpoint", []string{"mount", "--ctl", ctl, mnt, "--upstream", http}, []string{"needs --upstream"}},
		{"serve with arguments", []string{"serve", "--export", export, "--listen", "unix://" + filepath.Join(dir, "s"), "extra"}, []string{`"extra"`}},
		{"not a cachefs server", []string{"mount", "--upstream", http, "--ctl", ctl, mnt}, []string{http, "not a cachefs server", `"HTTP/1.1 400`}},
	} {
		_, stderr, err := run(30*time.Second, append([]string{cachefsdBin}, c.argv...)...)
		if err == nil {
			t.Errorf("%s: exit status 0, want an error", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q, want it to say %q", c.name, stderr, w)
			}
		}
		if isMounted(t, mnt) {
			t.Fatalf("%s: left %s mounted", c.name, mnt)
		}
	}
}

// httpLike listens on a unix socket as an HTTP server would answer the
// cachefs handshake, and returns its address.
func httpLike(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "http")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go upstream.AcceptLoop(l, func(c net.Conn) {
		c.Read(make([]byte, 4096))
		c.Write([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"))
		c.Close()
	})
	return "unix://" + path
}

//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

const (
	bigSize  = 32 << 20 // the file read across the restart
	bigChunk = 1 << 20
)

// writeBig writes bigSize bytes of pattern id to path, a chunk at a
// time, and returns their SHA-256.
func writeBig(t *testing.T, path string, id int) [32]byte {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer f.Close()
	h := sha256.New()
	for off := 0; off < bigSize; off += bigChunk {
		b := pattern(id<<8|off/bigChunk, bigChunk)
		h.Write(b)
		if _, err := f.Write(b); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// TestReadAcrossHostRestart reads a large file through the mount in
// chunks while the host server is killed and started again on the same
// socket: the read goes on with the same open file and ends with the
// file's bytes. A file replaced on the host during the restart fails
// the read with ESTALE instead of going on with another file's bytes.
func TestReadAcrossHostRestart(t *testing.T) {
	for _, mode := range []string{"consistent", "cached"} {
		t.Run(mode, func(t *testing.T) { testReadAcrossRestart(t, mode, false) })
		t.Run(mode+"/replaced", func(t *testing.T) { testReadAcrossRestart(t, mode, true) })
	}
}

func testReadAcrossRestart(t *testing.T, mode string, replace bool) {
	p := newPaths(t)
	host := filepath.Join(p.export, "big")
	want := writeBig(t, host, 1)
	srv := startServe(t, p.export, p.sock, false)
	startGuest(t, "mount", p.mnt, p.ctl, "mount", "--upstream", "unix://"+p.sock, "--default-mode", mode)
	f, err := os.Open(filepath.Join(p.mnt, "big"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, bigSize/4); err != nil {
		t.Fatalf("reading the first quarter: %v", err)
	}
	srv.kill(t)
	if replace {
		tmp := host + ".new"
		writeBig(t, tmp, 2)
		if err := os.Rename(tmp, host); err != nil {
			t.Fatalf("Rename: %v", err)
		}
	}
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(300 * time.Millisecond)
		os.Remove(p.sock)
		srv.start(t)
	}()
	n, err := io.CopyBuffer(h, f, make([]byte, bigChunk))
	<-restarted
	var got [32]byte
	copy(got[:], h.Sum(nil))
	switch {
	case replace && errors.Is(err, syscall.ESTALE):
	case replace && err == nil:
		t.Errorf("file replaced on the host: read %d more bytes without an error, want ESTALE (same bytes: %v)",
			n, bytes.Equal(got[:], want[:]))
	case replace:
		t.Errorf("file replaced on the host: got %v after %d more bytes, want ESTALE", err, n)
	case err != nil:
		t.Errorf("read across the restart failed after %d more bytes: %v", n, err)
	case n != bigSize-bigSize/4 || got != want:
		t.Errorf("read across the restart: %d more bytes, checksum differs: %v", n, got != want)
	}
}

//go:build linux

package upstream_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// wantProtocolError reads frames until a KindError frame and checks that
// its text mentions want and that the server then closes the connection.
// Replies to requests sent before the bad frame may come first.
func wantProtocolError(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	for {
		h, payload, err := readRawFrame(conn)
		if err != nil {
			t.Fatalf("got %v before an error frame", err)
		}
		if h.Kind == upstream.KindReply {
			continue
		}
		if h.Kind != upstream.KindError {
			t.Fatalf("got frame %+v, want kind %d", h, upstream.KindError)
		}
		var m upstream.ErrorMsg
		if err := upstream.Unmarshal(payload, &m); err != nil {
			t.Fatalf("error frame payload: %v", err)
		}
		if !strings.Contains(m.Text, want) {
			t.Errorf("error text %q does not mention %q", m.Text, want)
		}
		break
	}
	if _, _, err := readRawFrame(conn); !errors.Is(err, io.EOF) {
		t.Errorf("after the error frame: got %v, want EOF", err)
	}
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// TestHandshakeRejects sends bad first frames.
func TestHandshakeRejects(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	hello := func(magic string, version uint32) []byte {
		return rawRequest(upstream.OpHello, 1, &upstream.HelloReq{Magic: magic, Version: version})
	}
	tests := []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"bad magic", hello("CACHEFS0", upstream.Version), "magic"},
		{"bad version", hello(upstream.Magic, upstream.Version+1), "version"},
		{"version 1", hello(upstream.Magic, 1), "version 1 not supported"},
		{"ping for auth", append(rawHelloFrame(), rawRequest(upstream.OpPing, 2, &upstream.Empty{})...), "want auth"},
		{"hello twice", append(rawHelloFrame(), rawHelloFrame()...), "want auth"},
		{"short nonce", append(rawHelloFrame(), rawRequest(upstream.OpAuth, 2, &upstream.AuthReq{Nonce: []byte{1}})...), "nonce"},
		{"truncated auth", append(rawHelloFrame(), rawFrame(upstream.KindRequest, upstream.OpAuth, 2, le32(100))...), "bad auth"},
		{"ping first", rawRequest(upstream.OpPing, 1, &upstream.Empty{}), "hello"},
		{"reply kind", rawFrame(upstream.KindReply, upstream.OpHello, 1, nil), "hello"},
		{"truncated hello", rawFrame(upstream.KindRequest, upstream.OpHello, 1, le32(100)), "hello"},
		{"short length", le32(3), "shorter than header"},
		{"huge length", le32(0xffffffff), "exceeds limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := dialRaw(t, ts.addr)
			if _, err := conn.Write(tt.bytes); err != nil {
				t.Fatalf("Write: %v", err)
			}
			wantProtocolError(t, conn, tt.want)
		})
	}
}

// TestMalformedFrames sends one bad frame after a good handshake while
// another client keeps working; each bad frame gets an error frame and
// a closed connection, and the server serves on.
func TestMalformedFrames(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	good := newClient(t, ts.addr, upstream.ClientOptions{})
	lookupReq := upstream.Marshal(nil, &upstream.LookupReq{Parent: upstream.RootID, Name: "x"})
	tests := []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"short length", le32(upstream.HeaderSize - 1), "shorter than header"},
		{"zero length", le32(0), "shorter than header"},
		{"oversized", append(le32(upstream.HeaderSize+upstream.MaxFrame+1), 1, 3, 0), "exceeds limit"},
		{"huge length", le32(0xffffffff), "exceeds limit"},
		{"unknown op", rawFrame(upstream.KindRequest, 999, 7, nil), "unknown op 999"},
		{"op zero", rawFrame(upstream.KindRequest, 0, 7, nil), "unknown op 0"},
		{"second hello", rawHelloFrame(), "unknown op"},
		{"auth after handshake", rawAuthFrame(), "unknown op 40"},
		{"unknown kind", rawFrame(9, upstream.OpPing, 7, nil), "kind 9"},
		{"reply kind", rawFrame(upstream.KindReply, upstream.OpPing, 7, nil), "kind 2"},
		{"event kind", rawFrame(upstream.KindEvent, upstream.EvInvalidate, 7, nil), "kind 3"},
		{"trailing bytes", rawFrame(upstream.KindRequest, upstream.OpLookup, 7, append(lookupReq, 0)), "trailing"},
		{"truncated payload", rawFrame(upstream.KindRequest, upstream.OpLookup, 7, lookupReq[:10]), "malformed"},
		{"payload on ping", rawFrame(upstream.KindRequest, upstream.OpPing, 7, []byte{1}), "trailing"},
		{"bad bool", rawFrame(upstream.KindRequest, upstream.OpFsync, 7, append(make([]byte, 8), 7)), "bool"},
		{"huge count", rawFrame(upstream.KindRequest, upstream.OpForget, 7, le32(0xffffffff)), "elements"},
		{"after good request", append(rawRequest(upstream.OpPing, 6, &upstream.Empty{}),
			rawFrame(upstream.KindRequest, 999, 7, nil)...), "unknown op"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := dialRaw(t, ts.addr)
			rawHello(t, conn)
			if _, err := conn.Write(tt.bytes); err != nil {
				t.Fatalf("Write: %v", err)
			}
			wantProtocolError(t, conn, tt.want)
			must(t, good, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
			lookupMissing(t, good)
		})
	}
}

func lookupMissing(t *testing.T, c *upstream.Client) {
	t.Helper()
	err := try(c, upstream.OpLookup, &upstream.LookupReq{Parent: upstream.RootID, Name: "missing"}, &upstream.EntryResp{})
	wantErrno(t, "Lookup missing", err, syscall.ENOENT)
}

// TestStalledPeer leaves a connection in the middle of a frame; other
// clients are served meanwhile.
func TestStalledPeer(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	stalled := dialRaw(t, ts.addr)
	rawHello(t, stalled)
	frame := rawRequest(upstream.OpLookup, 2, &upstream.LookupReq{Parent: upstream.RootID, Name: "x"})
	if _, err := stalled.Write(frame[:len(frame)-1]); err != nil {
		t.Fatalf("Write: %v", err)
	}
	silent := dialRaw(t, ts.addr) // never says hello
	defer silent.Close()
	for i := 0; i < 3; i++ {
		c := newClient(t, ts.addr, upstream.ClientOptions{})
		must(t, c, upstream.OpPing, &upstream.Empty{}, &upstream.Empty{})
		lookupMissing(t, c)
	}
	// The stalled frame completes late and is answered.
	if _, err := stalled.Write(frame[len(frame)-1:]); err != nil {
		t.Fatalf("Write: %v", err)
	}
	stalled.SetReadDeadline(time.Now().Add(callTimeout))
	h, _, err := readRawFrame(stalled)
	if err != nil || h.ID != 2 || h.Errno != uint32(syscall.ENOENT) {
		t.Fatalf("stalled lookup: got %+v %v, want ENOENT reply to id 2", h, err)
	}
}

// TestErrorReplies checks that errors of a request are replies with an
// errno and no payload, and leave the connection open.
func TestErrorReplies(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	conn := dialRaw(t, ts.addr)
	rawHello(t, conn)
	reqs := [][]byte{
		rawRequest(upstream.OpGetattr, 10, &upstream.NodeReq{Node: 12345}),
		rawRequest(upstream.OpRead, 11, &upstream.ReadReq{Handle: 99, Size: 1}),
		rawRequest(upstream.OpRead, 12, &upstream.ReadReq{Handle: 99, Size: upstream.MaxIO + 1}),
		rawRequest(upstream.OpLookup, 13, &upstream.LookupReq{Parent: upstream.RootID, Name: ".."}),
		rawRequest(upstream.OpPing, 14, &upstream.Empty{}),
	}
	want := map[uint64]syscall.Errno{10: syscall.ESTALE, 11: syscall.EBADF, 12: syscall.EINVAL,
		13: syscall.EINVAL, 14: 0}
	for _, r := range reqs {
		if _, err := conn.Write(r); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	for range reqs {
		h, payload, err := readRawFrame(conn)
		if err != nil {
			t.Fatalf("read reply: %v", err)
		}
		if h.Kind != upstream.KindReply || syscall.Errno(h.Errno) != want[h.ID] {
			t.Errorf("reply %+v: want errno %v", h, want[h.ID])
		}
		if h.Errno != 0 && len(payload) != 0 {
			t.Errorf("reply %d: error reply carries %d bytes", h.ID, len(payload))
		}
		delete(want, h.ID)
	}
	if len(want) != 0 {
		t.Errorf("no replies to %v", want)
	}
}

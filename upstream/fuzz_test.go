//go:build linux

package upstream_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// Fuzz targets. Their seeds are built below and kept under
// testdata/fuzz/<target>/, written by
//
//	go test -run='^Fuzz' ./upstream/ -args -update-corpus

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the fuzz seed corpus under testdata/fuzz")

// writeCorpus saves seeds, each a list of fuzz arguments, in the
// "go test fuzz v1" format.
func writeCorpus(f *testing.F, seeds map[string][]any) {
	if !*updateCorpus {
		return
	}
	dir := filepath.Join("testdata", "fuzz", f.Name())
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0755); err != nil {
		f.Fatalf("MkdirAll: %v", err)
	}
	for name, args := range seeds {
		var b bytes.Buffer
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch a := a.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", a)
			case uint8:
				fmt.Fprintf(&b, "byte(%q)\n", a)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0644); err != nil {
			f.Fatalf("WriteFile: %v", err)
		}
	}
}

// FuzzUnmarshal decodes arbitrary bytes as each message type: it must
// fail with ErrMalformed or succeed, and what it decodes must encode to
// the same bytes (the encoding is canonical).
func FuzzUnmarshal(f *testing.F) {
	msgs := messages()
	seeds := map[string][]any{}
	for i, m := range msgs {
		seeds[typeName(m)] = []any{upstream.Marshal(nil, filled(m)), uint8(i)}
		seeds[typeName(m)+"-zero"] = []any{upstream.Marshal(nil, m), uint8(i)}
	}
	seeds["huge-count"] = []any{le32(0xffffffff), uint8(9)}
	writeCorpus(f, seeds)
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		m := fresh(msgs[int(which)%len(msgs)])
		if err := upstream.Unmarshal(data, m); err != nil {
			if !errors.Is(err, upstream.ErrMalformed) {
				t.Fatalf("Unmarshal %s: %v is not ErrMalformed", typeName(m), err)
			}
			return
		}
		if again := upstream.Marshal(nil, m); !bytes.Equal(again, data) {
			t.Fatalf("%s: decoded %+v re-encodes to %x, not %x", typeName(m), m, again, data)
		}
	})
}

// frameSeeds are request streams after the handshake: a session that uses
// every op, and broken frames. Node and handle ids are as a fresh server
// assigns them: root 1, then 2, 3...
func frameSeeds() map[string][]byte {
	type req struct {
		op  upstream.Op
		msg any
	}
	lock := upstream.Lock{End: ^uint64(0), Type: unix.F_WRLCK}
	session := []req{
		{upstream.OpMkdir, &upstream.MknodReq{Parent: 1, Name: "d", Mode: 0755}},
		{upstream.OpCreate, &upstream.CreateReq{Parent: 2, Name: "f", Flags: syscall.O_RDWR, Mode: 0644}},
		{upstream.OpWrite, &upstream.WriteReq{Handle: 1, Data: []byte("hello")}},
		{upstream.OpRead, &upstream.ReadReq{Handle: 1, Size: 10}},
		{upstream.OpLookup, &upstream.LookupReq{Parent: 2, Name: "f"}},
		{upstream.OpGetattr, &upstream.NodeReq{Node: 3}},
		{upstream.OpSetattr, &upstream.SetattrReq{Node: 3, Valid: upstream.SetSize | upstream.SetMode, Size: 2, Mode: 0600}},
		{upstream.OpSymlink, &upstream.SymlinkReq{Parent: 2, Name: "l", Target: "../../etc/passwd"}},
		{upstream.OpReadlink, &upstream.NodeReq{Node: 4}},
		{upstream.OpLink, &upstream.LinkReq{Node: 3, NewParent: 1, NewName: "g"}},
		{upstream.OpMknod, &upstream.MknodReq{Parent: 1, Name: "p", Mode: syscall.S_IFIFO | 0644}},
		{upstream.OpOpen, &upstream.OpenReq{Node: 3, Flags: syscall.O_RDWR}},
		{upstream.OpSetlk, &upstream.LockReq{Handle: 1, Owner: 1, Lock: lock}},
		{upstream.OpGetlk, &upstream.LockReq{Handle: 2, Owner: 2, Lock: lock}},
		{upstream.OpSetlk, &upstream.LockReq{Handle: 2, Flock: true, Lock: lock}},
		{upstream.OpFsync, &upstream.FsyncReq{Handle: 1}},
		{upstream.OpFlush, &upstream.HandleReq{Handle: 1}},
		{upstream.OpFallocate, &upstream.FallocateReq{Handle: 1, Length: 4096}},
		{upstream.OpLseek, &upstream.LseekReq{Handle: 1, Whence: unix.SEEK_END}},
		{upstream.OpSetxattr, &upstream.SetxattrReq{Node: 3, Name: "user.k", Data: []byte("v")}},
		{upstream.OpGetxattr, &upstream.XattrReq{Node: 3, Name: "user.k", Size: 10}},
		{upstream.OpListxattr, &upstream.XattrReq{Node: 3, Size: 100}},
		{upstream.OpRemovexattr, &upstream.XattrReq{Node: 3, Name: "user.k"}},
		{upstream.OpOpendir, &upstream.NodeReq{Node: 2}},
		{upstream.OpReaddir, &upstream.ReaddirReq{Handle: 3, Max: 10, Plus: true}},
		{upstream.OpReleasedir, &upstream.HandleReq{Handle: 3}},
		{upstream.OpReadTree, &upstream.TreeReq{Node: 1, MaxEntries: 100}},
		{upstream.OpApply, &upstream.ApplyReq{Ops: []upstream.WBOp{
			{Kind: upstream.WBMkdir, Path: "d/e", Mode: 0755},
			{Kind: upstream.WBCreate, Path: "d/e/x", Mode: 0644},
			{Kind: upstream.WBWrite, Path: "d/e/x", Data: []byte("data"), First: true, Size: 4},
			{Kind: upstream.WBSetattr, Path: "d/e/x", Valid: upstream.SetMode | upstream.SetMtime, Mode: 0600, Mtime: 1},
			{Kind: upstream.WBSymlink, Path: "d/e/y", Target: "x"},
			{Kind: upstream.WBLink, Path: "d/e/x", Path2: "d/e/z"},
			{Kind: upstream.WBRename, Path: "d/e/z", Path2: "d/e/w"},
			{Kind: upstream.WBUnlink, Path: "d/e/w"},
		}}},
		{upstream.OpStatfs, &upstream.Empty{}},
		{upstream.OpRename, &upstream.RenameReq{Parent: 2, Name: "f", NewParent: 1, NewName: "h"}},
		{upstream.OpUnlink, &upstream.UnlinkReq{Parent: 1, Name: "h"}},
		{upstream.OpRead, &upstream.ReadReq{Handle: 1, Size: 10}},
		{upstream.OpRelease, &upstream.HandleReq{Handle: 1}},
		{upstream.OpRmdir, &upstream.UnlinkReq{Parent: 1, Name: "d"}},
		{upstream.OpForget, &upstream.ForgetReq{Items: []upstream.ForgetItem{{Node: 3, Count: 9}, {Node: 2, Count: 1}}}},
		{upstream.OpPing, &upstream.Empty{}},
	}
	var all []byte
	for i, r := range session {
		all = append(all, rawRequest(r.op, uint64(i+2), r.msg)...)
	}
	watch := append(rawRequest(upstream.OpWatch, 2, &upstream.WatchReq{Node: 1}),
		rawRequest(upstream.OpMkdir, 3, &upstream.MknodReq{Parent: 1, Name: "w", Mode: 0755})...)
	watch = append(watch, rawRequest(upstream.OpAck, 4, &upstream.AckReq{Seq: 1})...)
	watch = append(watch, rawRequest(upstream.OpUnwatch, 5, &upstream.WatchReq{Node: 1})...)
	ping := rawRequest(upstream.OpPing, 2, &upstream.Empty{})
	return map[string][]byte{
		"session":   all,
		"watch":     watch,
		"ping":      ping,
		"truncated": ping[:len(ping)-3],
		"oversized": le32(0xffffffff),
		"short":     le32(3),
		"unknownop": rawFrame(upstream.KindRequest, 999, 2, nil),
		"kind":      rawFrame(upstream.KindEvent, upstream.OpPing, 2, nil),
		"trailing":  rawFrame(upstream.KindRequest, upstream.OpPing, 2, []byte{0}),
		"dotdot":    rawRequest(upstream.OpLookup, 2, &upstream.LookupReq{Parent: 1, Name: ".."}),
	}
}

// FuzzServerFrames feeds a request stream to a fresh server after a
// valid handshake. The server must neither crash nor hang: after the
// stream, the connection and server close and the connection's
// goroutine must end.
func FuzzServerFrames(f *testing.F) {
	seeds := map[string][]any{}
	for name, s := range frameSeeds() {
		seeds[name] = []any{s}
	}
	writeCorpus(f, seeds)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, stream []byte) {
		export, err := os.MkdirTemp(dir, "export")
		if err != nil {
			t.Fatalf("MkdirTemp: %v", err)
		}
		defer os.RemoveAll(export)
		serveStream(t, export, stream)
	})
}

// serveStream writes stream to a new server's connection frame by frame,
// waiting a little for an answer to each, so that a stream of requests
// runs mostly in order, as a guest's dependent requests do.
func serveStream(t *testing.T, export string, stream []byte) {
	srv, err := upstream.NewServer(upstream.ServerOptions{Export: export, MaxFDs: 16,
		SessionGrace: time.Millisecond, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	guest, host := net.Pipe()
	served := make(chan struct{})
	go func() {
		srv.ServeConn(host)
		close(served)
	}()
	guest.SetDeadline(time.Now().Add(5 * time.Second))
	frames := make(chan struct{}, 1024)
	go func() {
		defer close(frames)
		for {
			if _, _, err := readRawFrame(guest); err != nil {
				return
			}
			select {
			case frames <- struct{}{}:
			default:
			}
		}
	}()
	for rest := slices.Concat(rawHelloFrame(), rawAuthFrame(), stream); len(rest) > 0; {
		n, whole := nextFrame(rest)
		if _, err := guest.Write(clampFallocate(rest[:n])); err != nil || !whole {
			break // no answer comes to a frame cut short
		}
		rest = rest[n:]
		if !waitFrame(frames) {
			break
		}
	}
	guest.Close()
	srv.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatalf("the server's connection did not end")
	}
}

// nextFrame returns the length of b's first frame and true if it is
// whole and of a valid length, else all of b and false.
func nextFrame(b []byte) (int, bool) {
	if len(b) < 4 {
		return len(b), false
	}
	n := uint64(binary.LittleEndian.Uint32(b)) + 4
	if n < 4+upstream.HeaderSize || n > uint64(len(b)) {
		return len(b), false
	}
	return int(n), true
}

// waitFrame waits a little for a frame; it reports false once the
// connection has ended.
func waitFrame(frames chan struct{}) bool {
	select {
	case _, ok := <-frames:
		return ok
	case <-time.After(20 * time.Millisecond):
		return true
	}
}

// clampFallocate bounds the length of a fallocate request, so that a
// fuzzed one cannot fill the disk; other frames pass unchanged.
func clampFallocate(frame []byte) []byte {
	const max = 1 << 20
	var req upstream.FallocateReq
	if len(frame) < 4+upstream.HeaderSize || upstream.Op(binary.LittleEndian.Uint16(frame[5:])) != upstream.OpFallocate ||
		upstream.Unmarshal(frame[4+upstream.HeaderSize:], &req) != nil || req.Length <= max {
		return frame
	}
	req.Length = max
	return append(frame[:4+upstream.HeaderSize:4+upstream.HeaderSize], upstream.Marshal(nil, &req)...)
}

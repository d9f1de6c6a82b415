package fuseuring

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// signalPoll is how often a blocking request's caller is checked for a
// deliverable signal.
const signalPoll = 20 * time.Millisecond

// watchSignals interrupts request unique in ps once thread tid, which
// waits for it, has a signal pending that it does not block, or is
// gone; stop ends the watch.
func (q *queue) watchSignals(unique uint64, tid uint32) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(signalPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if signalPending(tid) {
					interrupt(q.ps, unique)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// signalPending reports whether thread tid has a signal pending that it
// does not block (the kernel would have sent INTERRUPT), or is gone.
func signalPending(tid uint32) bool {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return true
	}
	var pend, shared, blocked uint64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
		switch string(k) {
		case "SigPnd":
			pend = n
		case "ShdPnd":
			shared = n
		case "SigBlk":
			blocked = n
		}
	}
	return (pend|shared)&^blocked != 0
}

// interrupt gives ps the INTERRUPT the kernel sent to go-fuse's server.
func interrupt(ps *fuse.ProtocolServer, unique uint64) {
	in := fuse.InterruptIn{
		InHeader: fuse.InHeader{Length: uint32(unsafe.Sizeof(fuse.InterruptIn{})), Opcode: opInterrupt, Unique: unique | 1<<63},
		Unique:   unique,
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&in)), unsafe.Sizeof(in))
	ps.HandleRequest([][]byte{b}, [][]byte{make([]byte, 64)})
}

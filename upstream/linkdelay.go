package upstream

import (
	"io"
	"net"
	"runtime"
	"sync"
	"time"
)

// DelayConn models a VM link: each Write reaches the peer d after it was
// made and each chunk arriving from the peer is delivered d after it
// arrived, so a request and its reply cost 2d on top of their work.
// Messages in flight overlap (the delay is latency, not a bandwidth cap)
// and keep their order.
func DelayConn(c net.Conn, d time.Duration) net.Conn {
	if d <= 0 {
		return c
	}
	dc := &delayConn{Conn: c, d: d, out: make(chan chunk, 4096), in: make(chan chunk, 4096)}
	go dc.writer()
	go dc.reader()
	return dc
}

type chunk struct {
	data []byte
	due  time.Time
	err  error
}

type delayConn struct {
	net.Conn
	d   time.Duration
	out chan chunk
	in  chan chunk

	// rest is owned by Read's caller (net.Conn reads are not concurrent here).
	rest []byte

	mu     sync.Mutex // protects the following
	werr   error
	closed bool
}

func (dc *delayConn) Write(p []byte) (int, error) {
	c := chunk{data: append([]byte(nil), p...), due: time.Now().Add(dc.d)}
	dc.mu.Lock()
	defer dc.mu.Unlock()
	if dc.werr != nil {
		return 0, dc.werr
	}
	if dc.closed {
		return 0, net.ErrClosed
	}
	dc.out <- c // the writer drains without taking mu
	return len(p), nil
}

func (dc *delayConn) writer() {
	for c := range dc.out {
		waitUntil(c.due)
		if _, err := dc.Conn.Write(c.data); err != nil {
			dc.mu.Lock()
			dc.werr = err
			dc.mu.Unlock()
		}
	}
}

func (dc *delayConn) reader() {
	buf := make([]byte, 64<<10)
	for {
		n, err := dc.Conn.Read(buf)
		now := time.Now()
		if n > 0 {
			dc.in <- chunk{data: append([]byte(nil), buf[:n]...), due: now.Add(dc.d)}
		}
		if err != nil {
			dc.in <- chunk{err: err, due: now}
			close(dc.in)
			return
		}
	}
}

func (dc *delayConn) Read(p []byte) (int, error) {
	if len(dc.rest) == 0 {
		c, ok := <-dc.in
		if !ok {
			return 0, io.EOF
		}
		if c.err != nil {
			return 0, c.err
		}
		waitUntil(c.due)
		dc.rest = c.data
	}
	n := copy(p, dc.rest)
	dc.rest = dc.rest[n:]
	return n, nil
}

func (dc *delayConn) Close() error {
	dc.mu.Lock()
	if !dc.closed {
		dc.closed = true
		close(dc.out)
	}
	dc.mu.Unlock()
	return dc.Conn.Close()
}

// spinBelow is the remaining time under which waitUntil yields in a loop
// instead of sleeping: timer wake-ups are late by tens of microseconds,
// which would swamp a 50 us link delay.
const spinBelow = 80 * time.Microsecond

func waitUntil(t time.Time) {
	for {
		r := time.Until(t)
		if r <= 0 {
			return
		}
		if r > spinBelow {
			time.Sleep(r - spinBelow)
			continue
		}
		runtime.Gosched()
	}
}

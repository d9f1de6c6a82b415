package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// errConnLost reports a request whose connection failed before a reply.
var errConnLost = errors.New("cachefs: connection lost")

// clientConn is one connection of a Client. A reader goroutine routes
// replies to waiting calls by id and queues events without blocking.
type clientConn struct {
	c    *Client  // immutable
	conn net.Conn // immutable

	wmu sync.Mutex // serializes writes of frames
	buf []byte     // wmu protects buf

	heard atomic.Int64 // unix nanoseconds of the last frame received

	mu      sync.Mutex // protects the following
	pending map[uint64]chan reply
	err     error // set once the connection failed
}

type reply struct {
	h       Header
	payload []byte
	err     error
}

func newClientConn(c *Client, conn net.Conn) *clientConn {
	cc := &clientConn{c: c, conn: conn, pending: map[uint64]chan reply{}}
	cc.heard.Store(time.Now().UnixNano())
	go cc.readLoop()
	return cc
}

func (cc *clientConn) roundTrip(ctx context.Context, op Op, id uint64, req, resp any) error {
	ch := make(chan reply, 1)
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return errConnLost
	}
	cc.pending[id] = ch
	cc.mu.Unlock()
	if err := cc.sendFor(ctx, Header{Kind: KindRequest, Op: op, ID: id}, req); err != nil {
		cc.close(err)
	}
	r, err := cc.wait(ctx, op, id, ch)
	if err != nil {
		return err
	}
	if r.err != nil {
		return r.err
	}
	if r.h.Errno != 0 {
		return syscall.Errno(r.h.Errno)
	}
	if err := Unmarshal(r.payload, resp); err != nil {
		cc.close(err)
		return syscall.EPROTO
	}
	return nil
}

// handshakeCall is roundTrip for the handshake, where a lost connection
// fails the call with the reason it was lost, e.g. the host's KindError.
func (cc *clientConn) handshakeCall(ctx context.Context, op Op, id uint64, req, resp any) error {
	err := cc.roundTrip(ctx, op, id, req, resp)
	if errors.Is(err, errConnLost) {
		cc.mu.Lock()
		err = cc.err
		cc.mu.Unlock()
	}
	return err
}

func (cc *clientConn) wait(ctx context.Context, op Op, id uint64, ch chan reply) (reply, error) {
	var timeout, probe <-chan time.Time
	if op != OpSetlk {
		var stop func() bool
		timeout, stop = timer(cc.c.opts.Timeout)
		defer stop()
		if d := probeAfter(cc.c.opts.Reconnect); d > 0 && op != OpHello && op != OpAuth {
			t := time.NewTicker(d)
			defer t.Stop()
			probe = t.C
		}
	}
	var pinged int64 // when the last ping went out; 0: none unanswered
	g := giveUp{ctx: ctx, done: ctx.Done()}
	defer g.stop()
	for {
		done, poll := g.chans()
		select {
		case r := <-ch:
			return r, nil
		case <-timeout:
			cc.forget(id)
			return reply{}, syscall.ETIMEDOUT
		case <-done:
		case <-poll:
		case now := <-probe:
			if pinged != 0 && cc.heard.Load() < pinged {
				cc.forget(id) // not even a ping answered: the host is away
				return reply{}, syscall.EIO
			}
			pinged = 0
			if now.UnixNano()-cc.heard.Load() >= int64(probeAfter(cc.c.opts.Reconnect)) {
				pinged = now.UnixNano()
				go cc.send(Header{Kind: KindRequest, Op: OpPing, ID: cc.c.nextID.Add(1)}, &Empty{})
			}
			continue
		}
		if !g.woken() {
			continue
		}
		if cancellable(op) && cc.c.Offers(OpCancel) {
			return cc.cancel(id, ch), nil
		}
		cc.forget(id) // an older host: its wait goes on, unknown to the caller
		return reply{}, syscall.EINTR
	}
}

// minProbe is the shortest silence after which a host is pinged.
const minProbe = time.Second

// probeAfter is how long a silent host is waited for before it is
// pinged, and the ping's answer after that: the reconnect bound, at
// least minProbe; 0 (never) without a bound.
func probeAfter(reconnect time.Duration) time.Duration {
	if reconnect < 0 {
		return 0
	}
	return max(reconnect, minProbe)
}

// cancel gives up request id, a blocking lock, and returns its reply:
// EINTR once the host gave up waiting, or what the request did before
// the cancel reached the host. The lock is then taken or not, as the
// reply says, never behind the caller's back (server_cancel.go). The
// cancel's own reply is dropped: no call waits for its id.
func (cc *clientConn) cancel(id uint64, ch chan reply) reply {
	if err := cc.send(Header{Kind: KindRequest, Op: OpCancel, ID: cc.c.nextID.Add(1)}, &CancelReq{ID: id}); err != nil {
		cc.close(err) // the reply is then errConnLost: the call repeats the request and cancels it again
	}
	return <-ch
}

func (cc *clientConn) forget(id uint64) {
	cc.mu.Lock()
	delete(cc.pending, id)
	cc.mu.Unlock()
}

// sendPatience is how long a request's write may block before its
// caller's giving up is heeded (sendFor).
const sendPatience = 100 * time.Millisecond

// sendFor is send for a request whose caller may give up while the
// write blocks, as it does once a host that stopped reading has filled
// the socket: if ctx ends while the write has blocked for sendPatience,
// a write deadline in the past cuts it short. A frame cut short cannot
// be finished, so the connection fails; the client reconnects and the
// session resumes, with the other requests on it repeated.
func (cc *clientConn) sendFor(ctx context.Context, h Header, msg any) error {
	if ctx.Done() == nil {
		return cc.send(h, msg)
	}
	sent := make(chan struct{})
	t := time.AfterFunc(sendPatience, func() {
		g := giveUp{ctx: ctx, done: ctx.Done()}
		defer g.stop()
		for {
			done, poll := g.chans()
			select {
			case <-done:
			case <-poll:
			case <-sent:
				return
			}
			if g.woken() {
				cc.conn.SetWriteDeadline(time.Now())
				return
			}
		}
	})
	err := cc.send(h, msg)
	close(sent)
	t.Stop()
	return err
}

func (cc *clientConn) send(h Header, msg any) error {
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	cc.buf = appendFrame(cc.buf[:0], h, msg)
	_, err := cc.conn.Write(cc.buf)
	if cap(cc.buf) > 256<<10 {
		cc.buf = nil
	}
	cc.c.Stats.sent.Add(1)
	return err
}

func (cc *clientConn) readLoop() {
	fr := newFrameReader(cc.conn, MaxFrame)
	fr.r.Peek(4)
	first, _ := fr.r.Peek(min(fr.r.Buffered(), 40)) // for firstFrameErr
	first = append([]byte(nil), first...)
	for n := 0; ; n++ {
		h, payload, err := fr.next()
		if err == nil {
			err = cc.dispatch(h, payload)
		}
		if err != nil && n == 0 {
			err = firstFrameErr(first, h, err)
		}
		if err != nil {
			cc.close(err)
			return
		}
	}
}

func (cc *clientConn) dispatch(h Header, payload []byte) error {
	cc.c.Stats.received.Add(1)
	cc.heard.Store(time.Now().UnixNano())
	switch h.Kind {
	case KindReply:
		cc.mu.Lock()
		ch := cc.pending[h.ID]
		delete(cc.pending, h.ID)
		cc.mu.Unlock()
		if ch != nil {
			ch <- reply{h: h, payload: payload}
		}
		return nil
	case KindEvent:
		var b EventBatch
		if err := Unmarshal(payload, &b); err != nil {
			return protoErrorf("event: %v", err)
		}
		cc.c.events.push(&b)
		return nil
	case KindError:
		var m ErrorMsg
		Unmarshal(payload, &m)
		if m.Text == ErrAuth.Error() {
			return fmt.Errorf("host: %w", ErrAuth)
		}
		return &ProtocolError{Msg: "host: " + m.Text}
	}
	return protoErrorf("unexpected frame kind %d", h.Kind)
}

// close fails the connection and every call waiting on it.
func (cc *clientConn) close(err error) {
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return
	}
	cc.err = err
	pending := cc.pending
	cc.pending = nil
	cc.mu.Unlock()
	cc.conn.Close()
	cc.c.lost(cc, err) // before the calls retry: they must wait for the next
	for _, ch := range pending {
		ch <- reply{err: errConnLost}
	}
}

// failed reports whether the connection has failed.
func (cc *clientConn) failed() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.err != nil
}

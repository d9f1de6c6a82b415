package upstream

import (
	"errors"
	"net"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
)

// serverConn is one guest connection. Requests are handled concurrently,
// one goroutine each (at most maxInflight); replies and events share the
// connection under wmu and go out in completion order.
type serverConn struct {
	srv  *Server
	conn net.Conn
	fr   *frameReader // owned by serve's goroutine
	sess *session     // set by the handshake

	wmu sync.Mutex // serializes frames on conn
}

const maxInflight = 256

func (sc *serverConn) serve() {
	defer sc.conn.Close()
	if err := sc.handshake(); err != nil {
		sc.fatal(err)
		if sc.sess != nil {
			sc.srv.detached(sc.sess, sc)
		}
		return
	}
	var wg sync.WaitGroup
	sc.loop(&wg)
	// The grace period starts when the connection ends, not when its
	// last request does: a blocked lock request may wait for the
	// session's end to release the lock it waits on.
	sc.srv.detached(sc.sess, sc)
	wg.Wait()
}

// loop reads requests and starts a handler for each until the
// connection fails.
func (sc *serverConn) loop(wg *sync.WaitGroup) {
	sem := make(chan struct{}, maxInflight)
	for {
		h, payload, err := sc.fr.next()
		if err != nil {
			sc.fatal(err)
			return
		}
		if h.Kind != KindRequest {
			sc.fatal(protoErrorf("unexpected frame kind %d", h.Kind))
			return
		}
		hd := handlerFor(h.Op)
		if hd == nil {
			sc.fatal(protoErrorf("unknown op %d", h.Op))
			return
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			sc.handle(h, hd, payload)
		}()
	}
}

// fatal reports a protocol error to the peer and closes the connection
// at once, so no reply of a request still in flight follows the error.
// Plain I/O errors and EOF close silently, after those replies.
func (sc *serverConn) fatal(err error) {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		sc.srv.opts.Logf("cachefs: closing connection from %v: %v", sc.conn.RemoteAddr(), err)
		sc.conn.SetWriteDeadline(time.Now().Add(time.Second))
		sc.write(appendFrame(nil, Header{Kind: KindError}, &ErrorMsg{Text: pe.Error()}))
		sc.conn.Close()
	}
}

// ErrorMsg is the payload of a KindError frame.
type ErrorMsg struct{ Text string }

func (sc *serverConn) handshake() error {
	sc.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	h, payload, err := sc.fr.next()
	if err != nil {
		return err
	}
	sc.conn.SetReadDeadline(time.Time{})
	var req HelloReq
	if h.Kind != KindRequest || h.Op != OpHello {
		return protoErrorf("first frame must be hello, got kind %d op %d", h.Kind, h.Op)
	}
	if err := Unmarshal(payload, &req); err != nil || req.Magic != Magic {
		return protoErrorf("bad hello (magic %q): %v", req.Magic, err)
	}
	if req.Version != Version {
		return protoErrorf("protocol version %d not supported (want %d)", req.Version, Version)
	}
	ss, resumed := sc.srv.attach(&req)
	sc.sess = ss
	root, err := ss.rootEntry()
	if err != nil {
		return err
	}
	resp := HelloResp{Version: Version, Features: req.Features & AllFeatures, Session: ss.id,
		Resumed: resumed, Root: root, MaxFrame: MaxFrame, ReadOnly: sc.srv.opts.ReadOnly}
	ss.setConn(sc)
	return sc.write(appendFrame(nil, Header{Kind: KindReply, Op: OpHello, ID: h.ID}, &resp))
}

func (sc *serverConn) handle(h Header, hd handler, payload []byte) {
	sc.srv.requests.Add(1)
	resp, err := sc.call(hd, payload)
	rh := Header{Kind: KindReply, Op: h.Op, ID: h.ID}
	if err != nil {
		var pe *ProtocolError
		if errors.As(err, &pe) {
			sc.fatal(err)
			return
		}
		rh.Errno = uint32(sc.toErrno(h.Op, err))
		resp = nil
	}
	if err := sc.write(appendFrame(nil, rh, resp)); err != nil {
		sc.conn.Close()
	}
}

// call runs a handler, turning a panic into EREMOTEIO.
func (sc *serverConn) call(hd handler, payload []byte) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			sc.srv.opts.Logf("cachefs: handler panic: %v\n%s", r, debug.Stack())
			resp, err = nil, syscall.EREMOTEIO
		}
	}()
	return hd(sc.sess, payload)
}

// toErrno maps a handler error to the errno sent on the wire.
func (sc *serverConn) toErrno(op Op, err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	if errors.Is(err, ErrMalformed) {
		return syscall.EPROTO
	}
	sc.srv.opts.Logf("cachefs: op %d: %v", op, err)
	return syscall.EIO
}

func (sc *serverConn) write(frame []byte) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	_, err := sc.conn.Write(frame)
	return err
}

// SendEvents pushes a batch of events to the guest on this connection.
func (sc *serverConn) SendEvents(b *EventBatch) error {
	return sc.write(appendFrame(nil, Header{Kind: KindEvent, Op: EvInvalidate}, b))
}

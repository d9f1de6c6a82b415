//go:build linux

package upstream

import (
	"errors"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/cachefs/cachefs/upstream/hostfs"
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
		if inline(h.Op) {
			// Answered here, at once: a cancel must reach the requests
			// it cancels, and a ping shows the host alive (the guest's
			// probe of a slow reply), even when maxInflight of them
			// are blocked.
			sc.handle(h, hd, payload, nil)
			continue
		}
		// Registered before a cancel read after it can look for it.
		w := sc.sess.waits.begin(h.Op, h.ID)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			sc.handle(h, hd, payload, w.cancelled())
			sc.sess.waits.end(h.ID, w)
		}()
	}
}

// fatal reports a protocol error to the peer and closes the connection
// at once, so no reply of a request still in flight follows the error.
// A failed authentication is logged with its reason and reported as
// ErrAuth alone. Plain I/O errors and EOF close silently, after those
// replies.
func (sc *serverConn) fatal(err error) {
	var pe *ProtocolError
	var ae *authError
	var text string
	switch {
	case errors.As(err, &ae):
		text = ErrAuth.Error()
	case errors.As(err, &pe):
		text = pe.Error()
	default:
		return
	}
	sc.srv.opts.Logf("cachefs: closing connection from %v: %v", sc.conn.RemoteAddr(), err)
	sc.conn.SetWriteDeadline(time.Now().Add(time.Second))
	sc.write(appendFrame(nil, Header{Kind: KindError}, &ErrorMsg{Text: text}))
	sc.conn.Close()
}

// handshakeTimeout bounds the whole handshake.
const handshakeTimeout = 30 * time.Second

// handshake answers the guest's hello with a challenge, checks its proof
// of the secret, and only then attaches the connection to a session.
func (sc *serverConn) handshake() error {
	sc.conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
	defer sc.conn.SetReadDeadline(time.Time{})
	var req HelloReq
	h, err := sc.readHandshake(OpHello, &req)
	if err != nil {
		return err
	}
	if req.Magic != Magic {
		return protoErrorf("bad hello (magic %q)", req.Magic)
	}
	if req.Version != Version {
		return protoErrorf("protocol version %d not supported (want %d)", req.Version, Version)
	}
	secret := sc.srv.opts.Secret
	hostNonce := newNonce()
	ch := ChallengeResp{Nonce: hostNonce, Secret: len(secret) > 0}
	if err := sc.write(appendFrame(nil, Header{Kind: KindReply, Op: OpHello, ID: h.ID}, &ch)); err != nil {
		return err
	}
	var auth AuthReq
	if h, err = sc.readHandshake(OpAuth, &auth); err != nil {
		return err
	}
	if len(auth.Nonce) != NonceSize {
		return protoErrorf("auth: nonce of %d bytes, want %d", len(auth.Nonce), NonceSize)
	}
	if err := checkGuest(secret, &auth, hostNonce); err != nil {
		return err
	}
	return sc.welcome(h, &req, &auth, hostNonce)
}

// readHandshake reads the handshake request op into msg. A guest that
// gives up sends a KindError frame instead: logged, then closed.
func (sc *serverConn) readHandshake(op Op, msg any) (Header, error) {
	h, payload, err := sc.fr.next()
	if err != nil {
		return h, err
	}
	if h.Kind == KindError && op == OpAuth {
		var m ErrorMsg
		Unmarshal(payload, &m)
		sc.srv.opts.Logf("cachefs: connection from %v: guest gave up: %.200q", sc.conn.RemoteAddr(), m.Text)
		return h, io.EOF
	}
	if h.Kind != KindRequest || h.Op != op {
		return h, protoErrorf("handshake: want %v request, got kind %d op %d", op, h.Kind, h.Op)
	}
	if err := Unmarshal(payload, msg); err != nil {
		return h, protoErrorf("bad %v: %v", op, err)
	}
	return h, nil
}

// checkGuest checks the guest's proof of the secret, if there is one.
func checkGuest(secret []byte, auth *AuthReq, hostNonce []byte) error {
	switch {
	case len(secret) == 0:
		return nil
	case len(auth.Proof) == 0:
		return &authError{"the guest sent no proof (no secret?)"}
	case !checkProof(auth.Proof, guestProof(secret, hostNonce, auth.Nonce)):
		return &authError{"the guest's proof does not match (wrong secret?)"}
	}
	return nil
}

// welcome attaches the authenticated connection to its session and
// answers with HelloResp and the host's own proof.
func (sc *serverConn) welcome(h Header, req *HelloReq, auth *AuthReq, hostNonce []byte) error {
	ss, resumed := sc.srv.attach(req)
	sc.sess = ss
	root, err := ss.rootEntry()
	if err != nil {
		return err
	}
	feats := req.Features & AllFeatures &^ sc.srv.opts.WithheldFeatures
	if !sc.srv.caseFold {
		feats &^= FeatCaseFold
	}
	resp := HelloResp{Version: Version, Features: feats, Session: ss.id,
		Resumed: resumed, Root: root, MaxFrame: MaxFrame, ReadOnly: sc.srv.opts.ReadOnly}
	if secret := sc.srv.opts.Secret; len(secret) > 0 {
		resp.Proof = hostProof(secret, auth.Nonce, hostNonce)
	}
	ss.setConn(sc)
	return sc.write(appendFrame(nil, Header{Kind: KindReply, Op: OpAuth, ID: h.ID}, &resp))
}

// handle runs a request, or answers a repeat with its first run's
// reply; cancel is the request's, nil unless it may block.
func (sc *serverConn) handle(h Header, hd handler, payload []byte, cancel <-chan struct{}) {
	sc.srv.requests.Add(1)
	if pure(h.Op) {
		sc.reply(h, hd, payload, cancel)
		return
	}
	rc := sc.sess.replay
	for {
		e, first := rc.begin(h.ID)
		if first {
			if frame := sc.reply(h, hd, payload, cancel); frame != nil {
				rc.finish(h.ID, e, frame)
			} else {
				rc.forgetRunning(h.ID, e)
			}
			return
		}
		<-e.done // a repeat: the first execution's reply, once it has one
		if e.frame != nil {
			sc.srv.replayed.Add(1)
			sc.send(e.frame)
			return
		} // not kept: run it
	}
}

// reply runs a request and sends its reply frame, which it returns (nil
// after a protocol error, which ends the connection instead).
func (sc *serverConn) reply(h Header, hd handler, payload []byte, cancel <-chan struct{}) []byte {
	resp, err := sc.call(hd, payload, cancel)
	rh := Header{Kind: KindReply, Op: h.Op, ID: h.ID}
	if err != nil {
		var pe *ProtocolError
		if errors.As(err, &pe) {
			sc.fatal(err)
			return nil
		}
		rh.Errno = uint32(sc.toErrno(h.Op, err))
		resp = nil
	}
	frame := appendFrame(nil, rh, resp)
	sc.send(frame)
	return frame
}

// send writes a reply frame; a failed write ends the connection.
func (sc *serverConn) send(frame []byte) {
	if frame == nil {
		return
	}
	if err := sc.write(frame); err != nil {
		sc.conn.Close()
	}
}

// call runs a handler, turning a panic into EREMOTEIO.
func (sc *serverConn) call(hd handler, payload []byte, cancel <-chan struct{}) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			sc.srv.opts.Logf("cachefs: handler panic: %v\n%s", r, debug.Stack())
			resp, err = nil, syscall.EREMOTEIO
		}
	}()
	return hd(sc.sess, cancel, payload)
}

// toErrno maps a handler error to the errno sent on the wire, in
// Linux's numbering (hostfs.ToLinux).
func (sc *serverConn) toErrno(op Op, err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return hostfs.ToLinux(errno)
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

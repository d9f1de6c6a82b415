package upstream

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ClientOptions configure a guest's connection to the host server. The
// zero value of each field but Addr is a working default.
type ClientOptions struct {
	// Addr is the server's address (see transport.go). Required unless
	// Dial is set.
	Addr string
	// Dial overrides how connections are made.
	Dial func(ctx context.Context) (net.Conn, error)
	// Secret is the secret shared with the host (auth.go), proven at
	// every handshake, reconnects included; the host must prove it too.
	// Nil: the host must not ask for one.
	Secret []byte
	// LinkDelay adds this one-way delay to every message (DelayConn).
	LinkDelay time.Duration
	// Timeout bounds the wait for one reply on a live connection, except
	// for blocking lock requests. Zero: 2 minutes; negative: no bound.
	Timeout time.Duration
	// Reconnect bounds how long a request waits for the connection to
	// come back before it fails with EIO, and (at least a second) how
	// long a host that answers nothing is waited for on a live
	// connection before a ping, and the ping's answer after that (a
	// stopped host; a slow reply from a host that answers pings is
	// waited for up to Timeout). Zero: 30 seconds; negative: no
	// bound, the request waits for the host as long as it takes (a hard
	// mount, as NFS's). A request whose context ends stops waiting at
	// once, whatever the bounds.
	Reconnect time.Duration
	// OnEvents receives host event batches, one call at a time, on a
	// goroutine of its own: it may block without delaying replies.
	OnEvents func(*EventBatch)
	// OnSession is called after a reconnect with whether the server
	// resumed the session; if not, node ids and handles are void.
	OnSession func(resumed bool, root Entry)
	// Logf logs connection events. Nil: log.Printf.
	Logf func(format string, args ...any)
}

// ErrSessionLost reports a request whose node ids or handles belong to a
// session the server no longer has.
var ErrSessionLost = errors.New("cachefs: host session lost")

// Client is a guest's multiplexed connection to the host server. Calls
// may be made concurrently; each waits for its own reply.
type Client struct {
	opts   ClientOptions // immutable after NewClient
	Stats  *Stats        // immutable pointer
	events *eventQueue   // immutable pointer

	mu        sync.Mutex // protects the following
	onSession func(resumed bool, root Entry)
	cur       *clientConn
	up        chan struct{} // closed when cur is usable
	session   uint64
	epoch     uint64 // counts sessions; bumps when a session is not resumed
	hello     HelloResp
	closed    bool
	redialer  bool // a reconnect loop is running

	nextID atomic.Uint64
}

// NewClient connects and performs the handshake.
func NewClient(ctx context.Context, opts ClientOptions) (*Client, error) {
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Reconnect == 0 {
		opts.Reconnect = 30 * time.Second
	}
	if opts.Logf == nil {
		opts.Logf = log.Printf
	}
	c := &Client{opts: opts, Stats: newStats(), up: make(chan struct{}), onSession: opts.OnSession}
	c.events = newEventQueue(opts.OnEvents)
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// HandleEvents sets the receiver of host event batches (as
// ClientOptions.OnEvents) and of session changes after reconnects (as
// ClientOptions.OnSession), replacing those given before.
func (c *Client) HandleEvents(events func(*EventBatch), session func(resumed bool, root Entry)) {
	c.events.setHandler(events)
	c.mu.Lock()
	c.onSession = session
	c.mu.Unlock()
}

// Hello returns the server's handshake answer of the current session.
func (c *Client) Hello() HelloResp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hello
}

// Has reports whether the host offered feature f (Feat*) at the last
// handshake.
func (c *Client) Has(f uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hello.Features&f != 0
}

// Offers reports whether the host offered in this session what op needs:
// the feature that gates it in the ops table (ops_table.go), if any.
// Call fails with ENOSYS, sending nothing, an op the host does not offer.
func (c *Client) Offers(op Op) bool {
	g := op.info().gate
	return g == 0 || c.Has(g)
}

// Epoch identifies the current host session; node ids from another
// epoch are void.
func (c *Client) Epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	var conn net.Conn
	var err error
	if c.opts.Dial != nil {
		conn, err = c.opts.Dial(ctx)
	} else {
		conn, err = Dial(ctx, c.opts.Addr)
	}
	if err != nil {
		return nil, err
	}
	return DelayConn(conn, c.opts.LinkDelay), nil
}

// connect dials and shakes hands, installing the new connection.
func (c *Client) connect(ctx context.Context) error {
	start := time.Now()
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	cc := newClientConn(c, conn)
	resp, err := c.handshake(ctx, cc)
	if err != nil {
		var ae *authError
		if errors.As(err, &ae) { // tell the host why, for its log
			cc.send(Header{Kind: KindError}, &ErrorMsg{Text: "guest: " + err.Error()})
		}
		cc.close(err)
		return fmt.Errorf("handshake with %s: %w", c.opts.Addr, handshakeErr(ctx, start, err))
	}
	c.install(cc, resp)
	return nil
}

// handshake says hello, answers the host's challenge and checks the
// host's proof of the secret (auth.go).
func (c *Client) handshake(ctx context.Context, cc *clientConn) (*HelloResp, error) {
	c.mu.Lock()
	hello := HelloReq{Magic: Magic, Version: Version, Features: AllFeatures, Session: c.session}
	c.mu.Unlock()
	var ch ChallengeResp
	if err := cc.handshakeCall(ctx, OpHello, c.nextID.Add(1), &hello, &ch); err != nil {
		return nil, err
	}
	secret := c.opts.Secret
	switch {
	case len(ch.Nonce) != NonceSize:
		return nil, protoErrorf("hello: nonce of %d bytes, want %d", len(ch.Nonce), NonceSize)
	case ch.Secret && len(secret) == 0:
		return nil, &authError{"the host requires a shared secret and we have none"}
	case !ch.Secret && len(secret) > 0:
		return nil, &authError{"the host has no secret, so it cannot prove it holds ours"}
	}
	auth := AuthReq{Nonce: newNonce()}
	if len(secret) > 0 {
		auth.Proof = guestProof(secret, ch.Nonce, auth.Nonce)
	}
	var resp HelloResp
	err := cc.handshakeCall(ctx, OpAuth, c.nextID.Add(1), &auth, &resp)
	if errors.Is(err, ErrAuth) {
		return nil, &authError{"the host refused our proof: the secrets differ"}
	}
	if err != nil {
		return nil, err
	}
	if len(secret) > 0 && !checkProof(resp.Proof, hostProof(secret, auth.Nonce, ch.Nonce)) {
		return nil, &authError{"the host's proof does not match: it does not hold our secret"}
	}
	return &resp, nil
}

func (c *Client) install(cc *clientConn, resp *HelloResp) {
	c.mu.Lock()
	if !resp.Resumed {
		c.epoch++
	}
	first := c.session == 0 // the handshake of NewClient
	c.cur, c.session, c.hello = cc, resp.Session, *resp
	close(c.up)
	onSession := c.onSession
	c.mu.Unlock()
	if !first && onSession != nil {
		onSession(resp.Resumed, resp.Root)
	}
}

// lost is called once per connection when it fails; it starts the
// reconnect loop.
func (c *Client) lost(cc *clientConn, err error) {
	c.mu.Lock()
	if c.cur != cc || c.closed {
		c.mu.Unlock()
		return
	}
	c.cur = nil
	c.up = make(chan struct{})
	start := !c.redialer
	c.redialer = true
	c.mu.Unlock()
	c.opts.Logf("cachefs: connection to host lost: %v; reconnecting", err)
	if start {
		go c.redial()
	}
}

func (c *Client) redial() {
	backoff := 10 * time.Millisecond
	lastAuth := ""
	for {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.connect(ctx)
		cancel()
		if err == nil {
			c.opts.Logf("cachefs: reconnected to host")
			c.mu.Lock()
			// A connection lost between its install and here found this
			// redialer still running and started none: keep going.
			again := c.cur == nil && !c.closed
			if !again {
				c.redialer = false
			}
			c.mu.Unlock()
			if !again {
				return
			}
			continue
		}
		if errors.Is(err, ErrAuth) && err.Error() != lastAuth {
			c.opts.Logf("cachefs: reconnecting: %v", err) // once per reason: it may last
			lastAuth = err.Error()
		}
		time.Sleep(backoff)
		backoff = min(backoff*2, time.Second)
	}
}

// conn waits for a usable connection, up to the Reconnect bound.
func (c *Client) conn(ctx context.Context) (*clientConn, uint64, error) {
	c.mu.Lock()
	cc, up, epoch, closed := c.cur, c.up, c.epoch, c.closed
	c.mu.Unlock()
	if closed {
		return nil, 0, syscall.ENOTCONN
	}
	if cc != nil && cc.failed() {
		// Failing: its close is about to hand it to lost, which starts
		// the wait for a new one.
		runtime.Gosched()
		return c.conn(ctx)
	}
	if cc != nil {
		return cc, epoch, nil
	}
	t, stop := timer(c.opts.Reconnect)
	defer stop()
	g := giveUp{ctx: ctx, done: ctx.Done()}
	defer g.stop()
	for {
		done, poll := g.chans()
		select {
		case <-up:
			return c.conn(ctx)
		case <-t:
			return nil, 0, syscall.EIO
		case <-done:
		case <-poll:
		}
		if g.woken() {
			return nil, 0, syscall.EINTR
		}
	}
}

// Interruptible is a request context whose caller may survive an
// interrupt: its Done is closed at any interrupt, and Dying reports
// whether the caller gives up (cachefs's, for a FUSE request: whether
// the calling process is being killed). A request waiting with such a
// context stops once Done is closed and Dying says so, asked again every
// interruptPoll; with any other context it stops when Done is closed.
type Interruptible interface {
	context.Context
	Dying() bool
}

// interruptPoll is how often an interrupted caller that did not give
// up is asked again.
const interruptPoll = 100 * time.Millisecond

// giveUp follows a waiting request's context (Interruptible).
type giveUp struct {
	ctx  context.Context
	done <-chan struct{} // ctx.Done(), until the caller survived it
	tick *time.Ticker    // asks Dying again; nil until then
}

// chans returns the channels the wait selects on besides its own.
func (g *giveUp) chans() (<-chan struct{}, <-chan time.Time) {
	if g.tick == nil {
		return g.done, nil
	}
	return nil, g.tick.C
}

// woken reports whether the caller gives up, once one of chans fired
// (or anything else woke the wait).
func (g *giveUp) woken() bool {
	if g.tick == nil {
		select {
		case <-g.done:
		default:
			return false
		}
	}
	if d, ok := g.ctx.(Interruptible); ok && !d.Dying() {
		if g.tick == nil {
			g.tick = time.NewTicker(interruptPoll)
		}
		return false
	}
	return true
}

func (g *giveUp) stop() {
	if g.tick != nil {
		g.tick.Stop()
	}
}

// timer returns a channel that fires after d, never if d is negative,
// and the function that stops it.
func timer(d time.Duration) (<-chan time.Time, func() bool) {
	if d < 0 {
		return nil, func() bool { return false }
	}
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// HostTimeout returns the client options of a host timeout: d bounds the
// wait for an unreachable host and, if longer than the default, for a
// reply; a negative d waits for the host as long as it takes (hard).
func HostTimeout(d time.Duration) (timeout, reconnect time.Duration) {
	if d < 0 {
		return -1, -1
	}
	return max(d, 2*time.Minute), d
}

// Call sends req for op and decodes the reply into resp. It returns nil,
// a syscall.Errno from the host, or an error of the link mapped to an
// errno by ToErrno. Idempotent requests are retried across reconnects
// to a resumed session.
func (c *Client) Call(ctx context.Context, op Op, req, resp any) error {
	return c.CallIn(ctx, 0, op, req, resp)
}

// CallIn is Call for a request whose node ids and handles belong to
// host session epoch (Epoch): it fails with ErrSessionLost rather than
// send them in another session, where they are void or name other
// nodes. Epoch 0: any session.
func (c *Client) CallIn(ctx context.Context, epoch uint64, op Op, req, resp any) error {
	start := time.Now()
	c.Stats.begin()
	err := c.call(ctx, epoch, op, req, resp)
	c.Stats.end(op, time.Since(start))
	return err
}

func (c *Client) call(ctx context.Context, want uint64, op Op, req, resp any) error {
	cc, epoch, err := c.conn(ctx)
	if err == nil && want != 0 && epoch != want {
		return ErrSessionLost
	}
	id := c.nextID.Add(1) // kept across attempts: the host runs a repeat once
	for attempt := 0; ; attempt++ {
		if err != nil {
			return err
		}
		if !c.Offers(op) {
			return syscall.ENOSYS // an older host would close the connection
		}
		err = cc.roundTrip(ctx, op, id, req, resp)
		if !errors.Is(err, errConnLost) {
			return err
		}
		if !c.mayRepeat(op) || attempt >= 3 {
			return syscall.EIO
		}
		var now uint64
		if cc, now, err = c.conn(repeatContext(ctx, op)); err == nil && now != epoch {
			return ErrSessionLost
		}
	}
}

// repeatContext is what the wait for a connection to repeat a request
// on heeds. A blocking lock may still wait on the host: it is repeated,
// even if its caller gave up, so that its cancel reaches it (roundTrip
// sends one at once).
func repeatContext(ctx context.Context, op Op) context.Context {
	if op.info().repeatDetached {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// Close ends the connection for good.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	cc := c.cur
	c.mu.Unlock()
	c.events.close()
	if cc != nil {
		cc.close(errors.New("client closed"))
	}
	return nil
}

// Drop closes the current connection as if the link failed; the client
// reconnects. For tests and fault injection.
func (c *Client) Drop() {
	c.mu.Lock()
	cc := c.cur
	c.mu.Unlock()
	if cc != nil {
		cc.conn.Close()
	}
}

// mayRepeat reports whether op may be sent again when its reply was
// lost: every op where the host keeps replies for repeats (FeatReplay),
// else only the idempotent ones.
func (c *Client) mayRepeat(op Op) bool {
	return c.Has(FeatReplay) || idempotent(op)
}

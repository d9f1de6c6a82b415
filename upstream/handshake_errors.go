package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Handshake errors a user can act on: nothing answered, or something
// that does not speak cachefs did (an HTTP or SSH server on the port).

// notCachefsError reports a peer whose first frame was not a cachefs
// frame.
type notCachefsError struct {
	first []byte // the peer's first bytes
	err   error  // the framing error they caused
}

func (e *notCachefsError) Error() string {
	return fmt.Sprintf("not a cachefs server: it sent %q (%v)", e.first, e.err)
}

func (e *notCachefsError) Unwrap() error { return e.err }

// firstFrameErr turns a framing error of a connection's first frame,
// whose first bytes were first, into a notCachefsError; a cachefs
// host's KindError is its own.
func firstFrameErr(first []byte, h Header, err error) error {
	var pe *ProtocolError
	if h.Kind == KindError || !errors.As(err, &pe) {
		return err
	}
	return &notCachefsError{first: first, err: err}
}

// handshakeErr explains a handshake that ctx ended before an answer.
func handshakeErr(ctx context.Context, start time.Time, err error) error {
	if ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("no answer in %v: is a cachefs server listening there? (%w)",
		time.Since(start).Round(time.Millisecond), ctx.Err())
}

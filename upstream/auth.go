package upstream

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
)

// Authentication by shared secret, in the handshake. Each side sends a
// fresh random nonce and proves it holds the secret with an HMAC-SHA256
// over both nonces, keyed by the secret, so the secret never travels and
// a proof is good for one connection only. The two proofs are labelled
// by role, so one side's proof is never the other's. Proofs are
// compared in constant time. The secret authenticates the peers; it
// neither encrypts nor protects the frames that follow.

// MinSecret is the shortest secret ReadSecret accepts, in bytes.
const MinSecret = 16

const maxSecretFile = 4096

// ErrAuth is the error of a handshake whose authentication failed, on
// either side: a wrong secret, or a secret on one side only.
var ErrAuth = errors.New("authentication failed")

// authError is a failed authentication with its reason, for this side's
// log; the peer is told ErrAuth's text only.
type authError struct{ reason string }

func (e *authError) Error() string { return ErrAuth.Error() + ": " + e.reason }
func (e *authError) Unwrap() error { return ErrAuth }

// ReadSecret reads a shared secret from a file: its contents less
// surrounding white space, at least MinSecret bytes. The file must not
// be accessible to group or others. A good secret is random, e.g.
// `head -c 32 /dev/urandom | base64`.
func ReadSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("secret file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("secret file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0077 != 0 {
		return nil, fmt.Errorf("secret file %s: mode %04o lets others read it (chmod 600)", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("secret file %s: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return nil, fmt.Errorf("secret file %s: longer than %d bytes", path, maxSecretFile)
	}
	b = bytes.TrimSpace(b)
	if len(b) < MinSecret {
		return nil, fmt.Errorf("secret file %s: %d bytes, want at least %d", path, len(b), MinSecret)
	}
	return b, nil
}

// newNonce returns NonceSize random bytes.
func newNonce() []byte {
	b := make([]byte, NonceSize)
	rand.Read(b)
	return b
}

// Role labels of the proofs.
const (
	guestLabel = "cachefs v2 guest proof\x00"
	hostLabel  = "cachefs v2 host proof\x00"
)

// guestProof proves the guest's secret: it covers the host's nonce,
// which the guest cannot choose, before its own.
func guestProof(secret, hostNonce, guestNonce []byte) []byte {
	return proof(secret, guestLabel, hostNonce, guestNonce)
}

// hostProof proves the host's secret, over the guest's nonce first.
func hostProof(secret, guestNonce, hostNonce []byte) []byte {
	return proof(secret, hostLabel, guestNonce, hostNonce)
}

func proof(secret []byte, label string, first, second []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(first)
	m.Write(second)
	return m.Sum(nil)
}

// checkProof compares a proof received with the one expected, in
// constant time.
func checkProof(got, want []byte) bool {
	return hmac.Equal(got, want)
}

package upstream

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// A frame on the wire is a uint32 length (of header and payload), the
// Header, and the payload encoded by codec.go.

// ProtocolError is a fatal error in the peer's framing. The receiver
// sends a KindError frame with its text and closes the connection.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "cachefs protocol error: " + e.Msg }

func protoErrorf(format string, args ...any) error {
	return &ProtocolError{Msg: fmt.Sprintf(format, args...)}
}

// appendFrame appends a whole frame to b: length, header and payload,
// where payload is a message struct pointer or nil.
func appendFrame(b []byte, h Header, payload any) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, byte(h.Kind))
	b = binary.LittleEndian.AppendUint16(b, uint16(h.Op))
	b = binary.LittleEndian.AppendUint64(b, h.ID)
	b = binary.LittleEndian.AppendUint32(b, h.Errno)
	if payload != nil {
		b = Marshal(b, payload)
	}
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// frameReader reads frames, checking lengths before allocating.
type frameReader struct {
	r   *bufio.Reader
	max int
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next frame's header and payload. The payload is
// freshly allocated and owned by the caller.
func (fr *frameReader) next() (Header, []byte, error) {
	var lenbuf [4 + HeaderSize]byte
	if _, err := io.ReadFull(fr.r, lenbuf[:4]); err != nil {
		return Header{}, nil, err
	}
	n := int(binary.LittleEndian.Uint32(lenbuf[:4]))
	if n < HeaderSize {
		return Header{}, nil, protoErrorf("frame length %d shorter than header", n)
	}
	if n-HeaderSize > fr.max {
		return Header{}, nil, protoErrorf("frame length %d exceeds limit %d", n, fr.max)
	}
	if _, err := io.ReadFull(fr.r, lenbuf[4:]); err != nil {
		return Header{}, nil, unexpectedEOF(err)
	}
	h := Header{
		Kind:  Kind(lenbuf[4]),
		Op:    Op(binary.LittleEndian.Uint16(lenbuf[5:])),
		ID:    binary.LittleEndian.Uint64(lenbuf[7:]),
		Errno: binary.LittleEndian.Uint32(lenbuf[15:]),
	}
	payload := make([]byte, n-HeaderSize)
	if _, err := io.ReadFull(fr.r, payload); err != nil {
		return Header{}, nil, unexpectedEOF(err)
	}
	return h, payload, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

package upstream

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// dialHybrid opens a host-initiated hybrid vsock connection: connect to
// the hypervisor's unix socket, ask for the guest port, expect "OK ...".
func dialHybrid(ctx context.Context, path string, port uint32) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	if _, err := fmt.Fprintf(c, "CONNECT %d\n", port); err != nil {
		c.Close()
		return nil, err
	}
	line, err := readLine(c)
	if err != nil || !strings.HasPrefix(line, "OK ") {
		c.Close()
		return nil, fmt.Errorf("hybrid vsock %s port %d: handshake answer %q: %v", path, port, line, err)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// readLine reads one line byte by byte so that nothing after it is
// consumed from the connection.
func readLine(c net.Conn) (string, error) {
	var sb strings.Builder
	b := make([]byte, 1)
	for sb.Len() < 128 {
		if _, err := c.Read(b); err != nil {
			return sb.String(), err
		}
		if b[0] == '\n' {
			return sb.String(), nil
		}
		sb.WriteByte(b[0])
	}
	return sb.String(), bufio.ErrTooLong
}

package harness

import (
	"bytes"
	"regexp"
	"sync"
)

// OpCounter counts the FUSE requests the kernel sent a mount, by
// opcode name, from go-fuse's debug log ("rx 12: OPEN n5 ..."): tests
// prove that a request is answered in the kernel by its absence.
type OpCounter struct {
	mu     sync.Mutex // protects the following
	counts map[string]int
	part   []byte // an unfinished line
}

var rxLine = regexp.MustCompile(`\brx \d+: ([A-Z_0-9]+)\b`)

// Write takes log output; whole lines are counted.
func (c *OpCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.part = append(c.part, p...)
	for {
		i := bytes.IndexByte(c.part, '\n')
		if i < 0 {
			break
		}
		if m := rxLine.FindSubmatch(c.part[:i]); m != nil {
			c.counts[string(m[1])]++
		}
		c.part = c.part[i+1:]
	}
	return len(p), nil
}

// Count returns how many requests of op (such as "FLUSH") were sent.
func (c *OpCounter) Count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

// Reset forgets the counts so far.
func (c *OpCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[string]int{}
}

package main

import (
	"fmt"
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// hostTimeout is --host-timeout: how long a request waits for a host
// that is down, a duration or "hard" (as long as it takes, as NFS's hard
// mounts); docs/faults.md.
type hostTimeout struct {
	d    time.Duration // zero: the client's default
	hard bool
}

func (h *hostTimeout) String() string {
	switch {
	case h == nil || (!h.hard && h.d == 0):
		return "30s"
	case h.hard:
		return "hard"
	}
	return h.d.String()
}

func (h *hostTimeout) Set(s string) error {
	if s == "hard" {
		*h = hostTimeout{hard: true}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive duration (e.g. 30s) or hard, got %q", s)
	}
	*h = hostTimeout{d: d}
	return nil
}

// duration is the timeout as inproc.Options.HostTimeout takes it:
// negative for hard.
func (h *hostTimeout) duration() time.Duration {
	if h.hard {
		return -1
	}
	return h.d
}

// clientOptions sets o's reply and reconnect bounds.
func (h *hostTimeout) clientOptions(o upstream.ClientOptions) upstream.ClientOptions {
	if d := h.duration(); d != 0 {
		o.Timeout, o.Reconnect = upstream.HostTimeout(d)
	}
	return o
}

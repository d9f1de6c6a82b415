//go:build linux

package main

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestMetrics: --metrics serves what ctl stats shows in Prometheus's
// text format: the kernel's requests by opcode, the host requests by op
// with latency quantiles, caches, host events and the write-back.
func TestMetrics(t *testing.T) {
	p, addr := newPaths(t), freePort(t)
	startGuest(t, "local", p.mnt, p.ctl, "local", "--export", p.export, "--metrics", addr)
	for range 3 {
		if _, err := os.Stat(p.mnt); err != nil {
			t.Fatal(err)
		}
	}
	want := ctlStats(t, p.ctl)
	text := scrape(t, "http://"+addr+"/metrics")
	if got := metricValue(t, text, `cachefs_kernel_requests_total{op="GETATTR"}`); got < float64(want.kernelCount("GETATTR")) {
		t.Errorf("kernel GETATTR: metrics %v, want >= ctl stats' %d", got, want.kernelCount("GETATTR"))
	}
	if got := metricValue(t, text, `cachefs_upstream_requests_total{op="getattr"}`); got < float64(want.opCount("getattr")) {
		t.Errorf("host getattr requests: metrics %v, want >= ctl stats' %d", got, want.opCount("getattr"))
	}
	for _, name := range []string{
		`cachefs_upstream_request_latency_seconds{op="getattr",quantile="0.5"}`,
		`cachefs_upstream_messages_sent_total`, `cachefs_cache_hits_total`,
		`cachefs_host_events_total`, `cachefs_writeback_pending`, `cachefs_writeback_failures_total`,
	} {
		metricValue(t, text, name)
	}
}

// scrape GETs url and returns the body.
func scrape(t *testing.T, url string) string {
	t.Helper()
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(b)
}

// metricValue returns the value of the sample named (with labels) in
// Prometheus text; the test fails if there is none.
func metricValue(t *testing.T, text, sample string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no sample %s in the metrics:\n%s", sample, tail(text, 3000))
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", sample, err)
	}
	return v
}

//go:build linux

package main

import (
	"log"
	"net"
	"net/http"
	"time"

	"github.com/cachefs/cachefs/cachefs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// --metrics ADDR serves on http://ADDR/metrics, in Prometheus's format,
// what `ctl stats` shows, read from FS.Stats at each scrape: counters
// of requests (the kernel's by opcode, the host's by op), caches, host
// events and write-back, and gauges of what is held or pending. Host
// request latencies and event visibility are quantiles over a window of
// recent requests (as ctl stats shows them), not histograms. The Go
// runtime's and the process's metrics come with them.

// serveMetrics serves the metrics of fs on l until the process ends.
func serveMetrics(l net.Listener, fs *cachefs.FS) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(statsCollector{fs}, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("cachefsd: metrics: %v", srv.Serve(l))
}

// statsCollector collects FS.Stats.
type statsCollector struct{ fs *cachefs.FS }

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.fs.Stats()
	e := emitter{ch}
	u := st.Upstream
	e.counter("upstream_messages_sent_total", "Messages sent to the host.", u.Sent)
	e.counter("upstream_messages_received_total", "Messages received from the host.", u.Received)
	e.gauge("upstream_outstanding_requests", "Host requests waiting for an answer.", float64(u.Outstanding))
	for _, o := range u.Ops {
		e.counter("upstream_requests_total", "Host requests completed, by op.", o.Count, "op", o.Op)
		e.quantiles("upstream_request_latency_seconds", "Host request latency over recent requests, by op.",
			[]time.Duration{o.P50, o.P90, o.P98, o.P100}, []string{"0.5", "0.9", "0.98", "1"}, "op", o.Op)
	}
	for _, k := range st.Kernel {
		e.counter("kernel_requests_total", "FUSE requests the kernel sent, by opcode.", k.Count, "op", k.Op)
	}
	e.gauge("nodes", "Nodes the guest knows.", float64(st.Nodes))
	e.gauge("handles", "Open handles.", float64(st.Handles))
	c.collectCache(e, st.Cache)
	c.collectEvents(e, st.Events)
	c.collectWriteback(e, st.Writeback)
	e.counter("uring_requests_total", "Kernel requests answered over FUSE over io_uring.", st.RingRequests)
}

func (statsCollector) collectCache(e emitter, c cachefs.CacheStats) {
	e.counter("cache_hits_total", "Requests answered from the metadata cache.", c.Hits)
	e.counter("cache_misses_total", "Lookups in the metadata cache that missed.", c.Misses)
	e.counter("cache_fills_dropped_total", "Cache fills dropped as stale.", c.Dropped)
	e.counter("cache_invalidations_total", "Cache entries invalidated.", c.Invalidations)
	e.gauge("cache_dirs", "Directories held in the metadata cache.", float64(c.Dirs))
	e.gauge("cache_attrs", "Attributes held in the metadata cache.", float64(c.Attrs))
}

func (statsCollector) collectEvents(e emitter, ev cachefs.EventStats) {
	e.counter("host_event_batches_total", "Batches of host change events.", ev.Batches)
	e.counter("host_events_total", "Host change events.", ev.Events)
	e.counter("host_event_overflows_total", "Host watcher overflows (everything dropped).", ev.Overflows)
	e.counter("host_events_actuated_total", "Host events raised as inotify events in the guest.", ev.Actuated)
	e.counter("host_events_actuate_errors_total", "Host events whose inotify event failed.", ev.ActuateErrors)
	e.quantiles("host_event_visibility_seconds", "From the host seeing a change to the guest dropping its caches, over recent batches.",
		[]time.Duration{ev.P50, ev.P90, ev.P99, ev.P100}, []string{"0.5", "0.9", "0.99", "1"})
}

func (statsCollector) collectWriteback(e emitter, wb cachefs.WritebackStats) {
	e.gauge("writeback_pending", "Delegated changes waiting to be written back.", float64(wb.Pending))
	e.counter("writeback_sent_total", "Delegated changes written back.", wb.Sent)
	e.counter("writeback_batches_total", "Write-back batches sent.", wb.Batches)
	e.counter("writeback_retries_total", "Write-back batches sent again after a link error.", wb.Retries)
	e.counter("writeback_conflicts_total", "Write-backs that met a host change.", wb.Conflicts)
	e.counter("writeback_failures_total", "Delegated changes the host refused.", uint64(len(wb.Failures)))
	stalled := 0.0
	if wb.Stalled != nil {
		stalled = 1
	}
	e.gauge("writeback_stalled", "1 while the write-back waits for space on the host.", stalled)
}

// emitter sends metrics named cachefs_NAME, built at each scrape.
type emitter struct{ ch chan<- prometheus.Metric }

func (e emitter) metric(t prometheus.ValueType, name, help string, v float64, labels ...string) {
	var names, values []string
	for i := 0; i+1 < len(labels); i += 2 {
		names, values = append(names, labels[i]), append(values, labels[i+1])
	}
	d := prometheus.NewDesc("cachefs_"+name, help, names, nil)
	e.ch <- prometheus.MustNewConstMetric(d, t, v, values...)
}

func (e emitter) counter(name, help string, v uint64, labels ...string) {
	e.metric(prometheus.CounterValue, name, help, float64(v), labels...)
}

func (e emitter) gauge(name, help string, v float64, labels ...string) {
	e.metric(prometheus.GaugeValue, name, help, v, labels...)
}

// quantiles sends one gauge per quantile q[i] of value d[i].
func (e emitter) quantiles(name, help string, d []time.Duration, q []string, labels ...string) {
	for i := range d {
		e.gauge(name, help, d[i].Seconds(), append(labels, "quantile", q[i])...)
	}
}

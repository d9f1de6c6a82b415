// Package fuseuring serves a go-fuse mount's requests over FUSE over
// io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING, with the fuse module's
// enable_uring parameter on) instead of read(2) and write(2) on
// /dev/fuse.
//
// # Why
//
// Over /dev/fuse the kernel wakes whichever server thread waits in
// read(2), often on another CPU, which on a VM costs the wakeup of a
// halted vCPU each way. Over io_uring the kernel puts a request on the
// queue of the CPU its caller runs on; each queue here is served by a
// thread pinned to that CPU, so the request and its answer stay on one
// CPU (benchmarks/cmd/fuse-rtt: 12-14 us a round trip against 35 us).
//
// # How
//
// The mount is made by go-fuse with CAP_OVER_IO_URING in its INIT
// reply; from then on the kernel holds every request until each CPU's
// queue has an entry, so Start must run before the first request is
// awaited (go-fuse answers INIT inside NewServer, before WaitMount).
// Each queue has its own ring (ring.go) and entries (entry.go), each a
// header buffer (the request's fuse_in_header, the opcode's fixed
// struct, and the entry's commit id and payload size) and a payload
// buffer (names, data; on the way back the whole reply but its header).
// An entry is registered with FUSE_IO_URING_CMD_REGISTER, which
// completes with a request in it; the answer goes back with
// COMMIT_AND_FETCH, which completes with the next one. The kernel makes
// a queue per possible CPU and serves none until each has an entry
// (cpus.go); a queue of a CPU the daemon may not run on gets one entry
// and an unpinned thread.
//
// Requests are parsed and answered by a go-fuse ProtocolServer over the
// same RawFileSystem, given the INIT go-fuse negotiated, on the thread
// that serves the queue (thread.go), until one takes long (Handoff). An
// opcode that can wait on other requests (a blocking lock) is answered
// from its own goroutine, which queues its commit under the queue's
// submission lock and wakes the serving thread to submit it.
//
// # Handoff
//
// A request the daemon answers from memory costs a few microseconds; one
// that waits for the host (an upstream round trip, a reconnect, an
// fsync's write-back, a lock) can take any time, and the daemon cannot
// tell which it is before it answers. The serving thread answers each
// request itself, and a watch (a timer running only while requests
// come) hands the queue off when one takes longer than Options.HandOff
// (1 ms; handed off after one to two of them): another thread, a spare
// or a new one, pinned to the same CPU, serves the queue from then on,
// while the first finishes its request, queues the commit for the new
// serving thread (waking it as a blocking lock's goroutine does) and
// becomes a spare. A queue keeps Depth entries free beyond those held by
// handed-off requests, registering a new one for each (up to
// maxEntries): the kernel hands a request to a free entry at once, but a
// request that found none waits until one of the queue's requests is
// committed (registering an entry does not fetch it), so Depth (16) is
// also how many requests one CPU can send at once before one of them is
// handed off.
//
// The choice, measured with benchmarks/cmd/fuse-rtt (a getxattr answered
// from memory, 50,000 per run, 5-6 runs interleaved, medians of the
// runs' medians, on this 2-CPU VM under a load average of 10-16 from
// other work):
//
//	answered on the queue's thread (before handoffs)          11.1-11.3 us
//	the same with the watch (now)                             11.4 us
//	the same with a timer reset per request                   11.8 us
//	every request from a new goroutine, the serving
//	thread woken through the eventfd to commit it             128 us
//	every request from a new goroutine, the serving
//	thread waiting for it on a channel                        22 us
//	/dev/fuse, for comparison                                 14-18 us
//
// A goroutine per request costs 128 us because the serving thread keeps
// its P while it waits in io_uring_enter, and with GOMAXPROCS 2 the
// goroutine runs only once sysmon takes that P back; waiting on a
// channel instead costs two thread switches a request. A pool of
// goroutines per queue would wake them the same way. The watch costs the
// serving thread three atomic operations a request; the timer reset
// woke Go's netpoller each time.
//
// # Submitting
//
// Only a queue's own thread submits to its ring. The kernel puts a new
// request into an idle entry in the context of the thread that submitted
// that entry's last command (a task_work, which copies the request into
// the entry's buffers); the thread runs it when it next returns to user
// space or waits in io_uring_enter. A thread blocked in a FUSE request
// of the same mount never does: if that request, or one it waits on,
// was handed to such an entry, it never reaches the daemon. A goroutine
// that committed from its own thread left its entry owned by a thread
// of the Go runtime, which later ran other goroutines, among them
// callers of the mount when the daemon shares their process (cachefs's
// tests): a close(2) whose FLUSH went to that entry hung for good, in
// uninterruptible sleep. So the answering goroutine queues its
// COMMIT_AND_FETCH and writes an eventfd, which the queue's thread polls
// through its ring (IORING_OP_POLL_ADD); woken, the thread submits the
// commit with its own. The queue's thread is locked to it and makes no
// FUSE request, so every entry's requests are delivered.
//
// After a handoff the entries the first thread submitted last still get
// their next request on it, which the kernel delivers by interrupting
// its wait (Go's futex sleep is interruptible); so every thread that
// ever served a queue stays locked, runs nothing but the queue's work
// and lives until the queue stops (a thread's exit would cancel its
// commands). A request whose answer sleeps uninterruptibly (local disk
// I/O) delays those entries' next requests until it wakes.
//
// # Interrupts
//
// The kernel sends INTERRUPT through /dev/fuse, to go-fuse's server,
// which does not know requests served here and answers EAGAIN, so the
// kernel sends it again until the request ends. Requests answered on
// the queue thread end at once; for a blocking lock, and for any request
// handed off as overdue, a watcher polls the caller's pending signals
// and, when one is deliverable, interrupts the request in the
// ProtocolServer, as the INTERRUPT would have.
//
// # Known limit
//
// A request a ring entry holds is not ended when the process exits, nor
// by an abort through fusectl: a caller waiting for it keeps a process
// that is both daemon and caller (cachefs's tests) from exiting. A
// daemon of its own (cachefsd) that dies ends its callers' requests
// with ECONNABORTED. With the server in the same process as its
// callers, a signalled blocking lock sometimes never completed, and a
// close hung in FLUSH, until only the queue's thread submitted
// (Submitting); see cachefs/uring_test.go for the runs before and
// after. The tests that hold requests here mount in a process of their
// own (daemon_test.go). A request that waits holds up the ones behind
// it from its CPU for one to two HandOffs; requests beyond Depth sent
// at once from one CPU wait for one of the queue's requests to end.
// Each handoff leaves a thread per queue: at most one per request held
// at once.
package fuseuring

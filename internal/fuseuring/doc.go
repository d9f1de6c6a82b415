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
// Each queue has its own ring (ring.go) and Depth entries, each a
// header buffer (the request's fuse_in_header, the opcode's fixed
// struct, and the entry's commit id and payload size) and a payload
// buffer (names, data; on the way back the whole reply but its header).
// An entry is registered with FUSE_IO_URING_CMD_REGISTER, which
// completes with a request in it; the answer goes back with
// COMMIT_AND_FETCH, which completes with the next one.
//
// Requests are parsed and answered by a go-fuse ProtocolServer over the
// same RawFileSystem, given the INIT go-fuse negotiated. The queue's
// thread answers them one after the other; an opcode that can wait on
// other requests (a blocking lock) is answered from its own goroutine,
// which queues its commit under the queue's submission lock and wakes
// the queue's thread to submit it.
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
// # Interrupts
//
// The kernel sends INTERRUPT through /dev/fuse, to go-fuse's server,
// which does not know requests served here and answers EAGAIN, so the
// kernel sends it again until the request ends. Requests answered on
// the queue thread end at once; for a blocking one a watcher polls the
// caller's pending signals and, when one is deliverable, interrupts the
// request in the ProtocolServer, as the INTERRUPT would have.
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
// after. A queue's thread answers one request after the other, so a
// request that waits long holds up the ones behind it from that CPU;
// only blocking locks are answered off it. cachefsd serves over the
// rings when asked (--uring, cmd/cachefsd/uring.go).
package fuseuring

package invalidation

import (
	"runtime"
	"sync/atomic"
)

// Actuator runs syscalls on one locked OS thread, so that the FUSE
// requests they cause carry its thread id and the filesystem can tell
// them apart from everyone else's.
type Actuator struct {
	tid  atomic.Int32
	reqs chan func()
	done chan struct{}
}

// NewActuator starts the actuator's thread.
func NewActuator() *Actuator {
	a := &Actuator{reqs: make(chan func()), done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with it
		a.tid.Store(int32(gettid()))
		close(ready)
		for f := range a.reqs {
			f()
		}
		close(a.done)
	}()
	<-ready
	return a
}

// Tid is the thread id the actuator's requests carry.
func (a *Actuator) Tid() uint32 { return uint32(a.tid.Load()) }

// Run runs f on the actuator's thread and waits for it.
func (a *Actuator) Run(f func() error) error {
	errc := make(chan error, 1)
	a.reqs <- func() { errc <- f() }
	return <-errc
}

// Close stops the actuator's thread.
func (a *Actuator) Close() {
	close(a.reqs)
	<-a.done
}

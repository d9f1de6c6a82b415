package invalidation

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// The CoreServices and CoreFoundation calls of an FSEvents stream,
// bound at run time through purego: no cgo, so the server still
// cross-compiles from Linux.
var (
	fsLoad     sync.Once
	fsLoadErr  error
	cfArrayCBs uintptr // &kCFTypeArrayCallBacks

	cfStringCreateWithCString func(alloc uintptr, s *byte, enc uint32) uintptr
	cfArrayCreate             func(alloc uintptr, values *uintptr, n int, cbs uintptr) uintptr
	cfRelease                 func(ref uintptr)
	dispatchQueueCreate       func(label *byte, attr uintptr) uintptr
	dispatchRelease           func(obj uintptr)
	fsEventStreamCreate       func(alloc, cb uintptr, ctx *fsStreamContext, paths uintptr, since uint64, latency float64, flags uint32) uintptr
	fsEventStreamSetQueue     func(stream, queue uintptr)
	fsEventStreamStart        func(stream uintptr) bool
	fsEventStreamStop         func(stream uintptr)
	fsEventStreamInvalidate   func(stream uintptr)
	fsEventStreamRelease      func(stream uintptr)
	fsEventsGetCurrentEventID func() uint64
	fsCallback                uintptr
)

const (
	cfStringEncodingUTF8 = 0x08000100
	fsSinceNow           = ^uint64(0)
	// kFSEventStreamCreateFlagNoDefer | WatchRoot | FileEvents
	fsCreateFlags = 0x2 | 0x4 | 0x10
	// fsLatency is how long FSEvents gathers events before calling
	// back (seconds); the Batcher coalesces after that.
	fsLatency = 0.01
)

// fsStreamContext is FSEventStreamContext; info carries the stream's id.
type fsStreamContext struct {
	version         int
	info            uintptr
	retain, release uintptr
	copyDescription uintptr
}

func loadFSEvents() error {
	fsLoad.Do(func() {
		cs, err := purego.Dlopen("/System/Library/Frameworks/CoreServices.framework/CoreServices", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			fsLoadErr = fmt.Errorf("fsevents: %w", err)
			return
		}
		cf, err := purego.Dlopen("/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			fsLoadErr = fmt.Errorf("fsevents: %w", err)
			return
		}
		sys, err := purego.Dlopen("/usr/lib/libSystem.B.dylib", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			fsLoadErr = fmt.Errorf("fsevents: %w", err)
			return
		}
		if cfArrayCBs, err = purego.Dlsym(cf, "kCFTypeArrayCallBacks"); err != nil {
			fsLoadErr = fmt.Errorf("fsevents: %w", err)
			return
		}
		purego.RegisterLibFunc(&cfStringCreateWithCString, cf, "CFStringCreateWithCString")
		purego.RegisterLibFunc(&cfArrayCreate, cf, "CFArrayCreate")
		purego.RegisterLibFunc(&cfRelease, cf, "CFRelease")
		purego.RegisterLibFunc(&dispatchQueueCreate, sys, "dispatch_queue_create")
		purego.RegisterLibFunc(&dispatchRelease, sys, "dispatch_release")
		purego.RegisterLibFunc(&fsEventStreamCreate, cs, "FSEventStreamCreate")
		purego.RegisterLibFunc(&fsEventStreamSetQueue, cs, "FSEventStreamSetDispatchQueue")
		purego.RegisterLibFunc(&fsEventStreamStart, cs, "FSEventStreamStart")
		purego.RegisterLibFunc(&fsEventStreamStop, cs, "FSEventStreamStop")
		purego.RegisterLibFunc(&fsEventStreamInvalidate, cs, "FSEventStreamInvalidate")
		purego.RegisterLibFunc(&fsEventStreamRelease, cs, "FSEventStreamRelease")
		purego.RegisterLibFunc(&fsEventsGetCurrentEventID, cs, "FSEventsGetCurrentEventId")
		fsCallback = purego.NewCallback(fsEventsCallback)
	})
	return fsLoadErr
}

// fsStreams maps a stream's id (its context info) to its handler: one
// callback serves every stream, as purego's callbacks are never freed.
var (
	fsStreamsMu sync.Mutex
	fsStreams   = map[uintptr]func([]fsEvent){}
	fsNextID    uintptr
)

// fsStream is one running FSEvents stream on a dispatch queue of its own.
type fsStream struct {
	id     uintptr
	ref    uintptr
	queue  uintptr
	handle func([]fsEvent)
}

// newFSStream starts a stream over paths with the events since the
// event id since (fsSinceNow: from now on).
func newFSStream(paths []string, since uint64, handle func([]fsEvent)) (*fsStream, error) {
	refs := make([]uintptr, len(paths))
	for i, p := range paths {
		b, err := unix.BytePtrFromString(p)
		if err != nil {
			return nil, err
		}
		refs[i] = cfStringCreateWithCString(0, b, cfStringEncodingUTF8)
	}
	arr := cfArrayCreate(0, &refs[0], len(refs), cfArrayCBs)
	for _, r := range refs {
		cfRelease(r) // the array holds them
	}
	defer cfRelease(arr)
	fsStreamsMu.Lock()
	fsNextID++
	s := &fsStream{id: fsNextID, handle: handle}
	fsStreams[s.id] = handle
	fsStreamsMu.Unlock()
	ctx := fsStreamContext{info: s.id}
	s.ref = fsEventStreamCreate(0, fsCallback, &ctx, arr, since, fsLatency, fsCreateFlags)
	if s.ref == 0 {
		s.forget()
		return nil, fmt.Errorf("FSEventStreamCreate failed for %q", paths)
	}
	label := []byte("cachefs.fsevents\x00")
	s.queue = dispatchQueueCreate(&label[0], 0)
	fsEventStreamSetQueue(s.ref, s.queue)
	if !fsEventStreamStart(s.ref) {
		s.stop()
		return nil, fmt.Errorf("FSEventStreamStart failed for %q", paths)
	}
	return s, nil
}

// stop stops and releases the stream; no callback of it runs after.
func (s *fsStream) stop() {
	fsEventStreamStop(s.ref)
	fsEventStreamInvalidate(s.ref)
	fsEventStreamRelease(s.ref)
	dispatchRelease(s.queue)
	s.forget()
}

func (s *fsStream) forget() {
	fsStreamsMu.Lock()
	delete(fsStreams, s.id)
	fsStreamsMu.Unlock()
}

// fsEventsCallback is the FSEventStreamCallback of every stream: paths
// is a char** (no kFSEventStreamCreateFlagUseCFTypes).
func fsEventsCallback(stream, info, n uintptr, paths **byte, flags *uint32, ids unsafe.Pointer) {
	fsStreamsMu.Lock()
	handle := fsStreams[info]
	fsStreamsMu.Unlock()
	if handle == nil || n == 0 {
		return
	}
	ps := unsafe.Slice(paths, n)
	fs := unsafe.Slice(flags, n)
	evs := make([]fsEvent, n)
	for i := range evs {
		p := unix.BytePtrToString(ps[i])
		var st unix.Stat_t
		evs[i] = fsEvent{path: p, flags: fs[i], exists: unix.Lstat(p, &st) == nil}
	}
	handle(evs)
}

// events turns a callback's records into Changes.
func (w *fsWatcher) events(evs []fsEvent) {
	w.mu.Lock()
	roots := make(map[string]dirID, len(w.roots))
	for _, r := range w.roots {
		roots[r.path] = r.id
	}
	var cs []Change
	for _, ev := range evs {
		cs = append(cs, fsChanges(ev, roots, statDir, &w.cookie)...)
	}
	w.mu.Unlock()
	w.c.events.Add(uint64(len(evs)))
	for _, c := range cs {
		if c.Op == Overflow {
			w.c.overflows.Add(1)
		}
		w.emit(c)
	}
}

func statDir(p string) (dirID, bool) {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return dirID{}, false
	}
	return dirID{uint64(st.Dev), st.Ino}, true
}

package invalidation

// Op is what happened to a directory entry on the host.
type Op uint8

const (
	Create   Op = iota + 1 // Name appeared in Dir
	Delete                 // Name left Dir
	Modify                 // Name's content changed
	Attrib                 // Name's attributes changed
	MoveFrom               // Name left Dir by a rename (Cookie pairs it)
	MoveTo                 // Name entered Dir by a rename
	Overflow               // anything under Dir may have changed
)

// Change is one host filesystem event, before it is mapped to node ids.
type Change struct {
	Op      Op
	DirDev  uint64
	DirIno  uint64
	Name    string
	IsDir   bool
	Cookie  uint32
	RootDev uint64 // the watched root the change is under (Overflow: the root affected)
	RootIno uint64
}

// TreeWatcher watches directory trees for one consumer and calls its
// emit function with their Changes, from a goroutine of the watcher's
// (fanotify: of the Hub's, shared by all its watchers, so emit must not
// block). Both implementations emit the same Changes for the same host
// operations, except that fanotify reports a merged event's ops in a
// fixed order (see Hub) and both ends of a rename in one go.
type TreeWatcher interface {
	// AddTree watches the directory dirfd (any fd of it, O_PATH or not;
	// it is not kept) and everything beneath it, including directories
	// made or moved there later. Adding a root twice counts twice.
	AddTree(dirfd int) error
	// RemoveTree drops one count of the watched root (dev, ino); the
	// last one stops watching it. Unknown roots are ignored.
	RemoveTree(dev, ino uint64)
	// Close stops watching every tree of this watcher.
	Close() error
}

// dirID names a directory by (dev, ino).
type dirID struct{ dev, ino uint64 }

// Kind selects how a Hub watches the host.
type Kind uint8

const (
	// Auto is $CACHEFS_WATCHER (EnvKind) if set, else, on Linux,
	// Fanotify where fanotify_init and a filesystem mark work
	// (CAP_SYS_ADMIN and a filesystem with file handles and an fsid),
	// else Inotify; on macOS, FSEvents.
	Auto Kind = iota
	// Inotify gives each watcher an inotify fd of its own and a watch
	// per directory of its trees.
	Inotify
	// Fanotify shares one fanotify group among a Hub's watchers, with
	// one mark per watched filesystem and no per-directory cost.
	Fanotify
	// FSEvents (macOS, the only kind there) gives each watcher an
	// FSEvents stream over its trees' paths, with per-file events.
	FSEvents
)

// EnvKind names the environment variable that Auto defers to:
// "inotify", "fanotify" or "auto".
const EnvKind = "CACHEFS_WATCHER"

// HubOptions configure a Hub.
type HubOptions struct {
	// Kind picks the mechanism. Zero: Auto.
	Kind Kind
	// MountFD is a directory fd (not O_PATH) on the exported
	// filesystem: fanotify is probed on it and it is the mount_fd of
	// open_by_handle_at for that filesystem. The Hub keeps a duplicate.
	// Required unless Kind is Inotify.
	MountFD int
	// Unwatched are directory trees whose entries' changes fanotify
	// is told to ignore (an ignore mark on each directory in them, made
	// when a filesystem is first marked): writes there would otherwise
	// be read, and filtered or reported, one by one wherever they lie on
	// a marked filesystem, such as the guest's state directory when host
	// and guest run in one process (cachefsd local). Renames there are
	// still reported, and so are the makings of directories, which then
	// get an ignore mark of their own (with what is under them).
	// Inotify watches only the watched trees: nil to ignore.
	Unwatched []string
}

// Stats count a Hub's host events over all its watchers.
type Stats struct {
	Kind     Kind   // Inotify, Fanotify or FSEvents, as chosen
	Fallback string // why Auto chose Inotify, if it did
	Trees    int64  // watched roots, counted once per watcher
	Events   uint64 // raw events read
	// Filtered counts fanotify events that no watcher wanted: outside
	// every watched tree, or in a directory gone before it was resolved.
	Filtered uint64
	// Overflows counts Overflow changes emitted: queue overflows,
	// restarts and trees that could not be watched, once per root.
	Overflows uint64
	Restarts  uint64 // fanotify groups reopened after a read error
	Resolved  uint64 // directory handles resolved to paths (cache misses)
	// UnwatchedDirs counts directories made or moved into an unwatched
	// tree that were given an ignore mark then.
	UnwatchedDirs uint64
}

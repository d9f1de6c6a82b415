package upstream

// This file is the wire API: op ids, frame kinds and message types.
// It holds no logic. The encoding of each message is defined by codec.go
// from the field order below; changing a field's order or type is a
// protocol version change.

// Version is the protocol version spoken by this build. Version 2 added
// the second step of the handshake (OpAuth) and HelloResp.Proof;
// version 4 added WriteReq.Gid.
const Version = 4

// Magic opens every handshake.
const Magic = "CACHEFS1"

// MaxFrame bounds a frame's payload. Larger frames are a protocol error.
const MaxFrame = 4 << 20

// MaxIO is the largest read or write payload; it fits in a frame.
const MaxIO = 1 << 20

// Kind is a frame's kind.
type Kind uint8

const (
	KindRequest Kind = 1 // guest to host, answered by one KindReply
	KindReply   Kind = 2 // host to guest, answers a request by id
	KindEvent   Kind = 3 // host to guest, unsolicited; never answered
	KindError   Kind = 4 // either way: fatal protocol error text, then close
)

// Op identifies a request type.
type Op uint16

const (
	OpHello Op = iota + 1
	OpPing
	OpLookup
	OpForget
	OpGetattr
	OpSetattr
	OpReadlink
	OpMknod
	OpMkdir
	OpSymlink
	OpLink
	OpUnlink
	OpRmdir
	OpRename
	OpOpen
	OpCreate
	OpRead
	OpWrite
	OpFlush
	OpFsync
	OpRelease
	OpOpendir
	OpReaddir
	OpReleasedir
	OpStatfs
	OpGetxattr
	OpListxattr
	OpSetxattr
	OpRemovexattr
	OpFallocate
	OpLseek
	OpGetlk
	OpSetlk
	OpAccess
	OpReadTree
	OpWatch
	OpUnwatch
	OpAck
	OpApply
	OpAuth      // the handshake's second request
	OpReadNode  // a read by node, without a handle (FeatReadNode)
	OpCancel    // gives up a blocked request (FeatCancel)
	OpReadNodes // small regular files read whole by node, many at once (FeatReadNodes)
	opCount
)

// Feature bits negotiated at the handshake.
const (
	FeatReaddirPlus uint64 = 1 << iota // Readdir may return attributes
	FeatEvents                         // host pushes events
	FeatResume                         // sessions survive reconnects
	FeatReplay                         // requests repeated after a reconnect run once (replay.go)
	FeatReadNode                       // OpReadNode: a regular file read by node
	FeatCancel                         // OpCancel: a blocked lock request can be given up
	FeatTreeWB                         // WBMknod, WBRemoveTree, WBMoveOver, WBXattrs and WBReplace (overlay write-back)
	// FeatCaseFold is a property of the export, not an op: the host's
	// directories fold case (a macOS volume, an ext4 casefold
	// directory), so "A" and "a" are one name there. The host sets it
	// only where it is so, and only for a guest that asked for it.
	FeatCaseFold
	FeatReadNodes // OpReadNodes: small files read whole, many a message
)

// AllFeatures is what this build supports.
const AllFeatures = FeatReaddirPlus | FeatEvents | FeatResume | FeatReplay | FeatReadNode | FeatCancel | FeatTreeWB | FeatReadNodes | FeatCaseFold

// RootID is the node id of the export root in every session.
const RootID = 1

// Header precedes each frame's payload on the wire, after a uint32
// length that counts the header and payload.
type Header struct {
	Kind  Kind
	Op    Op
	ID    uint64
	Errno uint32 // replies only; 0 means success
}

// HeaderSize is the encoded size of Header.
const HeaderSize = 1 + 2 + 8 + 4

// Caller is the guest process on whose behalf a request is made.
type Caller struct {
	Uid, Gid, Pid uint32
}

// Attr is a file's attributes as the host sees them (after ownership
// overrides).
type Attr struct {
	Ino     uint64
	Size    uint64
	Blocks  uint64
	Atime   int64 // nanoseconds since the epoch
	Mtime   int64
	Ctime   int64
	Mode    uint32 // type and permission bits, as st_mode
	Nlink   uint32
	Uid     uint32
	Gid     uint32
	Rdev    uint32
	Blksize uint32
	Flags   uint32 // AttrNoXattrs
}

// Attr.Flags.
const (
	// AttrNoXattrs: the file has no extended attributes the guest may
	// see; set for regular files and directories (server_xinfo.go).
	AttrNoXattrs uint32 = 1 << 0
)

// Entry names a node the host has looked up. Each Entry returned counts
// one reference on the host, dropped by Forget.
type Entry struct {
	Node uint64
	Attr Attr
}

// NonceSize is the size of each side's handshake nonce.
const NonceSize = 32

// The handshake is two requests: OpHello, answered by ChallengeResp,
// then OpAuth, answered by HelloResp (auth.go has the proofs).

// HelloReq opens every connection. Its layout is the same in every
// version, so a peer of another version can tell it is one.
type HelloReq struct {
	Magic    string
	Version  uint32
	Features uint64
	Session  uint64 // nonzero: resume this session, once authenticated
}

// ChallengeResp answers HelloReq with the host's nonce and whether the
// host holds a secret the guest must prove it shares.
type ChallengeResp struct {
	Nonce  []byte // NonceSize random bytes
	Secret bool
}

// AuthReq is the guest's nonce and, if the host holds a secret, its
// proof: guestProof of the secret over both nonces (empty without).
type AuthReq struct {
	Nonce []byte
	Proof []byte
}

// HelloResp ends the handshake. Proof is the host's proof of the secret
// over both nonces (empty without a secret).
type HelloResp struct {
	Version  uint32
	Features uint64
	Session  uint64
	Resumed  bool
	Root     Entry
	MaxFrame uint32
	ReadOnly bool
	Proof    []byte
}

type Empty struct{}

type NodeReq struct {
	Node uint64
}

type LookupReq struct {
	Parent uint64
	Name   string
}

type ForgetReq struct {
	Items []ForgetItem
}

type ForgetItem struct {
	Node  uint64
	Count uint64
}

// Setattr valid bits.
const (
	SetMode uint32 = 1 << iota
	SetUid
	SetGid
	SetSize
	SetAtime
	SetMtime
	SetAtimeNow
	SetMtimeNow
	SetKillSuidgid
)

type SetattrReq struct {
	Node   uint64
	Handle uint64 // nonzero: use this open file
	Valid  uint32
	Mode   uint32
	Uid    uint32
	Gid    uint32
	Size   uint64
	Atime  int64
	Mtime  int64
}

type AttrResp struct {
	Attr Attr
}

type ReadlinkResp struct {
	Target string
}

type MknodReq struct {
	Parent uint64
	Name   string
	Mode   uint32
	Rdev   uint32
	Caller Caller
}

type SymlinkReq struct {
	Parent uint64
	Name   string
	Target string
	Caller Caller
}

type LinkReq struct {
	Node      uint64
	NewParent uint64
	NewName   string
}

type EntryResp struct {
	Entry Entry
}

type UnlinkReq struct {
	Parent uint64
	Name   string
}

// ChangedResp names the nodes of this session whose attributes an
// unlink or rename changed, so caches can drop them.
type ChangedResp struct {
	Nodes []uint64
}

// Rename flags, as renameat2. The server refuses any other bit
// (RENAME_WHITEOUT among them) with EINVAL.
const (
	RenameNoReplace uint32 = 1
	RenameExchange  uint32 = 2
)

type RenameReq struct {
	Parent    uint64
	Name      string
	NewParent uint64
	NewName   string
	Flags     uint32
}

type OpenReq struct {
	Node  uint64
	Flags uint32 // open(2) flags
}

type OpenResp struct {
	Handle uint64
}

type CreateReq struct {
	Parent uint64
	Name   string
	Flags  uint32
	Mode   uint32
	Caller Caller
}

type CreateResp struct {
	Entry   Entry
	Handle  uint64
	Created bool // the file is new: it has no extended attributes yet
}

type ReadReq struct {
	Handle uint64
	Offset int64
	Size   uint32
}

// ReadNodeReq reads a regular file by node: the host opens it read-only
// for this read alone. A guest reads files it opened read-only this way
// until it needs a handle, saving the Open and Release round trips.
type ReadNodeReq struct {
	Node   uint64
	Offset int64
	Size   uint32
}

type DataResp struct {
	Data []byte
}

// ReadNodesReq reads regular files whole by node, each of at most Max
// bytes: a guest that reads a directory's small files one after another
// fetches them in one round trip.
type ReadNodesReq struct {
	Nodes []uint64
	Max   uint32
}

// MaxReadNodes bounds a ReadNodesReq's nodes; the data of a reply is
// bounded by MaxIO.
const MaxReadNodes = 256

// ReadNodesResp has the files read, in the request's order: a node that
// is not a regular file, is bigger than Max, cannot be read or would
// take the reply past MaxIO is left out. Size and Mtime (ns) are the
// file's as read.
type ReadNodesResp struct {
	Files []NodeData
}

type NodeData struct {
	Node  uint64
	Size  int64
	Mtime int64
	Data  []byte
}

// Write flags. WriteKillSuidgid: the writer may not keep set-id bits
// (it lacks CAP_FSETID). The write then drops set-user-ID, and
// set-group-ID where group execution is set or the file's group is not
// WriteReq.Gid, the writer's: Linux's rule, but for the writer's
// supplementary groups, which the guest's kernel does not send (a file
// of one of those loses the bit too, the safe side).
const WriteKillSuidgid uint32 = 1

type WriteReq struct {
	Handle uint64
	Offset int64
	Flags  uint32
	Gid    uint32 // the writer's group (file system gid)
	Data   []byte
}

type WriteResp struct {
	Written uint32
}

type HandleReq struct {
	Handle uint64
}

type FsyncReq struct {
	Handle   uint64
	Datasync bool
}

type ReaddirReq struct {
	Handle uint64
	Offset uint64
	Max    uint32 // entries
	Plus   bool   // fill Entry for each name but "." and ".."
}

type Dirent struct {
	Name  string
	Off   uint64 // offset of the next entry
	Ino   uint64
	Mode  uint32 // type bits only, unless Plus
	Entry Entry  // Node is 0 unless Plus
}

type ReaddirResp struct {
	Entries []Dirent
	EOF     bool
}

type StatfsResp struct {
	Blocks, Bfree, Bavail, Files, Ffree uint64
	Bsize, NameLen, Frsize              uint32
}

type XattrReq struct {
	Node uint64
	Name string
	Size uint32 // 0: ask for the size only
}

type XattrResp struct {
	Size uint32
	Data []byte
}

type SetxattrReq struct {
	Node  uint64
	Name  string
	Data  []byte
	Flags uint32
}

type FallocateReq struct {
	Handle uint64
	Mode   uint32
	Offset int64
	Length int64
}

type LseekReq struct {
	Handle uint64
	Offset int64
	Whence uint32
}

type LseekResp struct {
	Offset int64
}

// Lock types, as F_RDLCK, F_WRLCK, F_UNLCK.
type Lock struct {
	Start, End uint64 // End is inclusive; ^uint64(0) is EOF
	Type       uint32
	Pid        uint32
}

type LockReq struct {
	Handle uint64
	Owner  uint64
	Lock   Lock
	Flock  bool // BSD flock semantics rather than POSIX
	Wait   bool
}

type LockResp struct {
	Lock Lock
}

// CancelReq gives up request ID, a blocking lock request (OpSetlk with
// Wait) whose caller was interrupted. The host interrupts the wait and
// answers request ID with EINTR, or as it would have if the lock was
// taken first; the cancel itself is answered at once with Empty, and a
// cancel of a request that is not running does nothing.
type CancelReq struct {
	ID uint64
}

type AccessReq struct {
	Node   uint64
	Mask   uint32
	Caller Caller
}

// TreeReq asks for the listings, with attributes, of a directory and
// its subdirectories breadth first, up to MaxEntries entries in all.
type TreeReq struct {
	Node       uint64
	MaxEntries uint32
}

// TreeDir is one directory's whole listing. Each entry but "." and ".."
// carries an Entry, counting one host reference.
type TreeDir struct {
	Node    uint64
	Entries []Dirent
}

// TreeResp holds whole listings only: a directory that did not fit is
// left out, and Truncated says the walk stopped early.
type TreeResp struct {
	Dirs      []TreeDir
	Truncated bool
}

// ApplyReq carries a delegated subtree's write-back: changes the guest
// already made, by path relative to the export root, applied in order.
// Each op is idempotent, so a batch may be sent again after a lost
// reply or a crash: the host ends in the same state.
type ApplyReq struct {
	Ops []WBOp
}

// Write-back op kinds.
const (
	WBMkdir   uint8 = iota + 1 // Path is a directory (Mode, Uid, Gid)
	WBCreate                   // Path is a regular file (Mode, Uid, Gid), kept if it exists
	WBSymlink                  // Path is a symlink to Target (Uid, Gid)
	WBWrite                    // Path's bytes at Offset are Data; Size: the file's size after, First: truncate
	WBUnlink                   // Path is gone (a file)
	WBRmdir                    // Path is gone (a directory)
	WBRename                   // Path moved to Path2 (Flags as Rename)
	WBSetattr                  // Path's attributes per Valid (as SetattrReq)
	WBLink                     // Path2 is a new name of Path
	// The kinds below need FeatTreeWB (server_apply_tree.go).
	WBMknod      // Path is a fifo, socket or device (Mode with its type bits, Uid, Gid; a device's number in Size, as Attr.Rdev)
	WBRemoveTree // Path is gone, with everything under it if a directory
	WBMoveOver   // Path moved to Path2, replacing what is there, a directory with its contents
	WBXattrs     // Path's extended attributes are exactly those in Data (EncodeXattrs), but for names the host keeps to itself
)

// WBReplace in Flags of WBMkdir, WBCreate, WBSymlink and WBMknod (with
// FeatTreeWB): whatever else is at Path goes first, a directory with
// its contents. What is kept: a directory for WBMkdir, a regular file
// for WBCreate, a symlink to Target for WBSymlink, that type (a device's
// placeholder) for WBMknod; but for a directory, only with no other link.
const WBReplace uint32 = 1 << 8

type WBOp struct {
	Kind   uint8
	Path   string
	Path2  string
	Target string
	Mode   uint32
	Uid    uint32
	Gid    uint32
	Valid  uint32
	Flags  uint32
	First  bool
	Size   uint64
	Offset int64
	Atime  int64
	Mtime  int64
	Data   []byte
}

// ApplyResp has an errno for each op (0: done) and the inode number of
// what each op left at its path (0 if none).
type ApplyResp struct {
	Errnos []uint32
	Inos   []uint64
}

// WatchReq asks the host to watch (or, with OpUnwatch, stop watching)
// the subtree under Node and push its changes as events.
type WatchReq struct {
	Node uint64
}

// AckReq acknowledges event batches up to Seq.
type AckReq struct {
	Seq uint64
}

// Events, host to guest, in KindEvent frames with Op EvInvalidate.
const EvInvalidate Op = 1

type EventBatch struct {
	Seq    uint64
	Time   int64 // host clock, ns, when the batch's first change was seen
	Events []Event
}

// Event kinds: what the guest must drop.
const (
	EvAttr    uint8 = 1 // Node's (Name in Parent) attributes or data
	EvEntry   uint8 = 2 // Name in Parent, and Parent's listing
	EvSubtree uint8 = 3 // everything under Node (0: everything)
)

// Event is one host change. Op is what happened (invalidation.Op), for
// the guest's inotify watchers; Node is 0 where the guest never saw it.
type Event struct {
	Kind   uint8
	Op     uint8
	Node   uint64
	Parent uint64
	Name   string
	IsDir  bool
	Cookie uint32
}

// ErrorMsg is the payload of a KindError frame.
type ErrorMsg struct{ Text string }

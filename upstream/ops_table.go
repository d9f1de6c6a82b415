package upstream

// This file is the table of what is known about each op, the one place
// for it: its name, its messages, whether it may be repeated, whether
// the host keeps its reply for a repeat, whether it may block until
// cancelled, and the feature that gates it. The server's dispatch
// (server_ops.go checks each handler against its row), the replay cache
// (replay.go), the client's retry rules (client.go), cancellation
// (server_cancel.go, client_conn.go) and the stats names (stats.go) are
// derived from it. Adding an op is a row here, its handler and its
// messages in proto.go.

// opInfo is one op's row.
type opInfo struct {
	name string // in stats and logs
	// req and resp are the request and reply messages, as typed nil
	// pointers; a handler's must be the same (on, server_ops.go).
	req, resp any
	// handshake: sent only in the handshake, never through Call; the
	// server has no handler for it.
	handshake bool
	// idempotent: may be sent again when its reply was lost, even to a
	// host without FeatReplay (Client.mayRepeat).
	idempotent bool
	// pure: changes nothing on the host, so running it again is
	// harmless and the replay cache keeps no reply for it. (A cancel
	// changes what another request does, but the same however often it
	// is repeated.)
	pure bool
	// cancellable: may block on the host until the guest cancels it
	// (OpCancel); its handler sees the cancel channel (onCancellable).
	cancellable bool
	// repeatDetached: after a lost connection the request is repeated
	// even if its caller gave up meanwhile, so that the cancel sent at
	// once reaches a wait still on the host (repeatContext).
	repeatDetached bool
	// inline: the server's reader answers it at once, outside the bound
	// on requests in flight (a cancel must reach blocked requests, a
	// ping shows the host alive).
	inline bool
	// gate is the feature the host must have offered before the client
	// sends the op; 0: none. Client.Offers checks it.
	gate uint64
}

// opTable is the ops table, indexed by op. Op 0 and numbers past the
// last op are no ops: their row is empty.
var opTable = [opCount]opInfo{
	OpHello: {name: "hello", req: (*HelloReq)(nil), resp: (*ChallengeResp)(nil), handshake: true},
	OpAuth:  {name: "auth", req: (*AuthReq)(nil), resp: (*HelloResp)(nil), handshake: true},
	OpPing: {name: "ping", req: (*Empty)(nil), resp: (*Empty)(nil),
		idempotent: true, pure: true, inline: true},
	OpLookup:   {name: "lookup", req: (*LookupReq)(nil), resp: (*EntryResp)(nil), idempotent: true},
	OpForget:   {name: "forget", req: (*ForgetReq)(nil), resp: (*Empty)(nil)},
	OpGetattr:  {name: "getattr", req: (*NodeReq)(nil), resp: (*AttrResp)(nil), idempotent: true, pure: true},
	OpSetattr:  {name: "setattr", req: (*SetattrReq)(nil), resp: (*AttrResp)(nil), idempotent: true},
	OpReadlink: {name: "readlink", req: (*NodeReq)(nil), resp: (*ReadlinkResp)(nil), idempotent: true, pure: true},
	OpMknod:    {name: "mknod", req: (*MknodReq)(nil), resp: (*EntryResp)(nil)},
	OpMkdir:    {name: "mkdir", req: (*MknodReq)(nil), resp: (*EntryResp)(nil)},
	OpSymlink:  {name: "symlink", req: (*SymlinkReq)(nil), resp: (*EntryResp)(nil)},
	OpLink:     {name: "link", req: (*LinkReq)(nil), resp: (*EntryResp)(nil)},
	OpUnlink:   {name: "unlink", req: (*UnlinkReq)(nil), resp: (*ChangedResp)(nil)},
	OpRmdir:    {name: "rmdir", req: (*UnlinkReq)(nil), resp: (*ChangedResp)(nil)},
	OpRename:   {name: "rename", req: (*RenameReq)(nil), resp: (*ChangedResp)(nil)},
	OpOpen:     {name: "open", req: (*OpenReq)(nil), resp: (*OpenResp)(nil), idempotent: true},
	OpCreate:   {name: "create", req: (*CreateReq)(nil), resp: (*CreateResp)(nil)},
	OpRead:     {name: "read", req: (*ReadReq)(nil), resp: (*DataResp)(nil), idempotent: true, pure: true},
	OpReadNode: {name: "readnode", req: (*ReadNodeReq)(nil), resp: (*DataResp)(nil),
		idempotent: true, pure: true, gate: FeatReadNode},
	OpReadNodes: {name: "readnodes", req: (*ReadNodesReq)(nil), resp: (*ReadNodesResp)(nil),
		idempotent: true, pure: true, gate: FeatReadNodes},
	OpWrite:       {name: "write", req: (*WriteReq)(nil), resp: (*WriteResp)(nil), idempotent: true},
	OpFlush:       {name: "flush", req: (*HandleReq)(nil), resp: (*Empty)(nil), idempotent: true},
	OpFsync:       {name: "fsync", req: (*FsyncReq)(nil), resp: (*Empty)(nil), idempotent: true},
	OpRelease:     {name: "release", req: (*HandleReq)(nil), resp: (*Empty)(nil), idempotent: true},
	OpOpendir:     {name: "opendir", req: (*NodeReq)(nil), resp: (*OpenResp)(nil), idempotent: true},
	OpReaddir:     {name: "readdir", req: (*ReaddirReq)(nil), resp: (*ReaddirResp)(nil), idempotent: true, pure: true},
	OpReleasedir:  {name: "releasedir", req: (*HandleReq)(nil), resp: (*Empty)(nil), idempotent: true},
	OpStatfs:      {name: "statfs", req: (*Empty)(nil), resp: (*StatfsResp)(nil), idempotent: true, pure: true},
	OpGetxattr:    {name: "getxattr", req: (*XattrReq)(nil), resp: (*XattrResp)(nil), idempotent: true, pure: true},
	OpListxattr:   {name: "listxattr", req: (*XattrReq)(nil), resp: (*XattrResp)(nil), idempotent: true, pure: true},
	OpSetxattr:    {name: "setxattr", req: (*SetxattrReq)(nil), resp: (*Empty)(nil)},
	OpRemovexattr: {name: "removexattr", req: (*XattrReq)(nil), resp: (*Empty)(nil)},
	OpFallocate:   {name: "fallocate", req: (*FallocateReq)(nil), resp: (*Empty)(nil), idempotent: true},
	OpLseek:       {name: "lseek", req: (*LseekReq)(nil), resp: (*LseekResp)(nil), idempotent: true, pure: true},
	OpGetlk:       {name: "getlk", req: (*LockReq)(nil), resp: (*LockResp)(nil), idempotent: true, pure: true},
	OpSetlk: {name: "setlk", req: (*LockReq)(nil), resp: (*Empty)(nil),
		cancellable: true, repeatDetached: true},
	OpCancel: {name: "cancel", req: (*CancelReq)(nil), resp: (*Empty)(nil),
		pure: true, inline: true, gate: FeatCancel},
	// The guest mounts with default_permissions: the host answers ENOSYS.
	OpAccess:   {name: "access", req: (*AccessReq)(nil), resp: (*Empty)(nil), pure: true},
	OpReadTree: {name: "readtree", req: (*TreeReq)(nil), resp: (*TreeResp)(nil), idempotent: true},
	OpWatch:    {name: "watch", req: (*WatchReq)(nil), resp: (*Empty)(nil), idempotent: true},
	OpUnwatch:  {name: "unwatch", req: (*WatchReq)(nil), resp: (*Empty)(nil)},
	OpAck:      {name: "ack", req: (*AckReq)(nil), resp: (*Empty)(nil)},
	OpApply:    {name: "apply", req: (*ApplyReq)(nil), resp: (*ApplyResp)(nil), idempotent: true},
}

// info returns op's row; the empty row for a number that is no op.
func (op Op) info() opInfo {
	if op < opCount {
		return opTable[op]
	}
	return opInfo{}
}

// idempotent ops may be sent again when their reply was lost, even to a
// host without FeatReplay.
func idempotent(op Op) bool { return op.info().idempotent }

// pure ops change nothing on the host: running them again is harmless.
func pure(op Op) bool { return op.info().pure }

// cancellable reports whether a request of op may block until the guest
// cancels it.
func cancellable(op Op) bool { return op.info().cancellable }

// inline reports whether the server's reader answers op at once.
func inline(op Op) bool { return op.info().inline }

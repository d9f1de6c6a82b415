package upstream

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

// The answers of the switches that ops replaced (pure in replay.go,
// idempotent in client.go, cancellable in server_cancel.go,
// repeatContext in client.go, the ops the server's reader answered
// inline in server_conn.go, the feature gates checked by the callers,
// the names in stats.go), kept to show the table changed no op's
// behaviour. An op added later is checked by TestOpsTable alone.
var (
	switchLastOp    = OpReadNodes
	switchPure      = []Op{OpPing, OpGetattr, OpReadlink, OpRead, OpReaddir, OpStatfs, OpGetxattr, OpListxattr, OpLseek, OpGetlk, OpAccess, OpReadNode, OpReadNodes, OpCancel}
	switchIdem      = []Op{OpPing, OpLookup, OpGetattr, OpReadlink, OpRead, OpWrite, OpFlush, OpFsync, OpReaddir, OpStatfs, OpGetxattr, OpListxattr, OpLseek, OpGetlk, OpSetattr, OpOpen, OpOpendir, OpRelease, OpReleasedir, OpFallocate, OpApply, OpReadTree, OpWatch, OpReadNode, OpReadNodes}
	switchCancel    = []Op{OpSetlk}
	switchDetached  = []Op{OpSetlk}
	switchInline    = []Op{OpCancel, OpPing}
	switchHandshake = []Op{OpHello, OpAuth}
	switchGates     = map[Op]uint64{OpReadNode: FeatReadNode, OpReadNodes: FeatReadNodes, OpCancel: FeatCancel}
	switchNames     = [...]string{OpHello: "hello", OpPing: "ping", OpLookup: "lookup", OpForget: "forget",
		OpGetattr: "getattr", OpSetattr: "setattr", OpReadlink: "readlink", OpMknod: "mknod",
		OpMkdir: "mkdir", OpSymlink: "symlink", OpLink: "link", OpUnlink: "unlink", OpRmdir: "rmdir",
		OpRename: "rename", OpOpen: "open", OpCreate: "create", OpRead: "read", OpWrite: "write",
		OpFlush: "flush", OpFsync: "fsync", OpRelease: "release", OpOpendir: "opendir",
		OpReaddir: "readdir", OpReleasedir: "releasedir", OpStatfs: "statfs", OpGetxattr: "getxattr",
		OpListxattr: "listxattr", OpSetxattr: "setxattr", OpRemovexattr: "removexattr",
		OpFallocate: "fallocate", OpLseek: "lseek", OpGetlk: "getlk", OpSetlk: "setlk", OpAccess: "access",
		OpReadTree: "readtree", OpWatch: "watch", OpUnwatch: "unwatch", OpAck: "ack", OpApply: "apply",
		OpAuth: "auth", OpReadNode: "readnode", OpCancel: "cancel",
		OpReadNodes: "readnodes"}
)

// TestOpsTableAsSwitches compares the table's answers for every op,
// and for the numbers on either side, with those of the switches it
// replaced.
func TestOpsTableAsSwitches(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for op := Op(0); op <= switchLastOp+1; op++ {
		i := op.info()
		checks := []struct {
			what      string
			got, want bool
		}{
			{"pure", i.pure, slices.Contains(switchPure, op)},
			{"idempotent", i.idempotent, slices.Contains(switchIdem, op)},
			{"cancellable", i.cancellable, slices.Contains(switchCancel, op)},
			{"repeat detached", i.repeatDetached, slices.Contains(switchDetached, op)},
			{"repeat ignores the caller's end", repeatContext(ctx, op).Err() == nil, slices.Contains(switchDetached, op)},
			{"inline", i.inline, slices.Contains(switchInline, op)},
			{"handshake", i.handshake, slices.Contains(switchHandshake, op)},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%v: %s %v, want %v", op, c.what, c.got, c.want)
			}
		}
		if i.gate != switchGates[op] {
			t.Errorf("%v: gate %#x, want %#x", op, i.gate, switchGates[op])
		}
		want := "op" + strconv.Itoa(int(op))
		if int(op) < len(switchNames) && switchNames[op] != "" {
			want = switchNames[op]
		}
		if op.String() != want {
			t.Errorf("op %d: name %q, want %q", op, op.String(), want)
		}
	}
}

// TestOpsTable checks every row: a name of its own, messages, and a
// gate that is one feature bit of this build.
func TestOpsTable(t *testing.T) {
	names := map[string]Op{}
	for op := Op(1); op < opCount; op++ {
		i := op.info()
		if i.name == "" {
			t.Errorf("op %d: no name", op)
		}
		if o, dup := names[i.name]; dup {
			t.Errorf("ops %d and %d both named %q", o, op, i.name)
		}
		names[i.name] = op
		for _, m := range []any{i.req, i.resp} {
			if m == nil || reflect.TypeOf(m).Kind() != reflect.Pointer || reflect.TypeOf(m).Elem().Kind() != reflect.Struct {
				t.Errorf("%v: message %T, want a typed nil pointer to a struct", op, m)
			}
		}
		if g := i.gate; g != 0 && (g&(g-1) != 0 || g&AllFeatures == 0) {
			t.Errorf("%v: gate %#x is not one feature of AllFeatures", op, g)
		}
	}
}

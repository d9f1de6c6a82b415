//go:build linux

package upstream_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("ReadDir /proc/self/fd: %v", err)
	}
	return len(ents)
}

func content(i int) []byte { return []byte(fmt.Sprintf("file %d\n", i)) }

// TestFDBound keeps no fd per known inode: with 500 nodes and 100 open
// files the server holds at most MaxFDs fds, reopening on demand.
func TestFDBound(t *testing.T) {
	const maxFDs, files, opened = 16, 500, 100
	ts := startServer(t, upstream.ServerOptions{MaxFDs: maxFDs})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	base := openFDs(t)
	d := mkdir(t, c, upstream.RootID, "d")
	nodes := make([]upstream.Entry, files)
	for i := range nodes {
		var h uint64
		nodes[i], h = create(t, c, d.Node, fmt.Sprintf("f%03d", i))
		write(t, c, h, 0, content(i))
		must(t, c, upstream.OpRelease, &upstream.HandleReq{Handle: h}, &upstream.Empty{})
	}
	handles := make([]uint64, opened)
	for i := range handles {
		handles[i] = open(t, c, nodes[i].Node, syscall.O_RDWR)
	}
	for i, h := range handles {
		write(t, c, h, int64(len(content(i))), []byte("more"))
	}
	for i, h := range handles {
		want := append(content(i), "more"...)
		if got := read(t, c, h, 0, 100); !bytes.Equal(got, want) {
			t.Errorf("read f%03d: got %q, want %q", i, got, want)
		}
	}
	for i, e := range nodes {
		var a upstream.AttrResp
		must(t, c, upstream.OpGetattr, &upstream.NodeReq{Node: e.Node}, &a)
		if i >= opened && a.Attr.Size != uint64(len(content(i))) {
			t.Errorf("f%03d: size %d", i, a.Attr.Size)
		}
	}
	st := ts.srv.Stats()
	if st.CachedFDs > maxFDs || st.Evictions == 0 || st.Nodes < files {
		t.Errorf("Stats %+v: want CachedFDs <= %d, evictions, %d nodes", st, maxFDs, files)
	}
	if n := openFDs(t) - base; n > maxFDs {
		t.Errorf("process holds %d more fds with %d nodes and %d open files, want <= %d", n, files, opened, maxFDs)
	}
	for i := 0; i < opened; i++ {
		got, err := os.ReadFile(filepath.Join(ts.export, "d", fmt.Sprintf("f%03d", i)))
		if want := append(content(i), "more"...); !bytes.Equal(got, want) {
			t.Errorf("host f%03d: got %q %v, want %q", i, got, err, want)
		}
	}
}

// TestUnlinkedOpenFile reads and writes files whose last name the guest
// removed, after enough other files went through the fd cache to evict
// theirs: an unlinked file cannot be reopened, so its fd must stay.
func TestUnlinkedOpenFile(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{MaxFDs: 16})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	e1, h1 := create(t, c, upstream.RootID, "unlinked")
	write(t, c, h1, 0, []byte("one"))
	must(t, c, upstream.OpUnlink, &upstream.UnlinkReq{Parent: upstream.RootID, Name: "unlinked"}, &upstream.ChangedResp{})
	_, h2 := create(t, c, upstream.RootID, "replaced")
	write(t, c, h2, 0, []byte("two"))
	create(t, c, upstream.RootID, "other")
	must(t, c, upstream.OpRename, &upstream.RenameReq{Parent: upstream.RootID, Name: "other",
		NewParent: upstream.RootID, NewName: "replaced"}, &upstream.ChangedResp{})
	for round := 0; round < 2; round++ {
		evict(t, c, 40)
		for _, f := range []struct {
			h    uint64
			want string
		}{{h1, "one"}, {h2, "two"}} {
			if got := read(t, c, f.h, 0, 10); string(got) != f.want {
				t.Errorf("round %d: read: got %q, want %q", round, got, f.want)
			}
			write(t, c, f.h, 0, []byte(f.want))
		}
		var a upstream.AttrResp
		must(t, c, upstream.OpGetattr, &upstream.NodeReq{Node: e1.Node}, &a)
		if a.Attr.Nlink != 0 || a.Attr.Size != 3 {
			t.Errorf("round %d: Getattr of the unlinked file: nlink %d size %d", round, a.Attr.Nlink, a.Attr.Size)
		}
	}
	if st := ts.srv.Stats(); st.Evictions == 0 {
		t.Errorf("Stats %+v: no evictions", st)
	}
}

// TestFlockSurvivesEviction unlocks a flock lock after its handle's fd
// was evicted: the unlock must reach the open file that holds the lock.
func TestFlockSurvivesEviction(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{MaxFDs: 16})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	e, h1 := create(t, c, upstream.RootID, "f")
	h2 := open(t, c, e.Node, syscall.O_RDWR)
	flock := func(h uint64, typ uint32) error {
		return try(c, upstream.OpSetlk, &upstream.LockReq{Handle: h, Flock: true, Lock: upstream.Lock{Type: typ}}, &upstream.Empty{})
	}
	if err := flock(h1, unix.F_WRLCK); err != nil {
		t.Fatalf("flock h1: %v", err)
	}
	evict(t, c, 40)
	wantErrno(t, "flock h2 while h1 holds it", flock(h2, unix.F_WRLCK), syscall.EAGAIN)
	if err := flock(h1, unix.F_UNLCK); err != nil {
		t.Fatalf("unlock h1: %v", err)
	}
	if err := flock(h2, unix.F_WRLCK); err != nil {
		t.Errorf("flock h2 after h1 unlocked: %v", err)
	}
}

// TestRootRefsBalanced checks that requests on the export root give back
// the references they take on its fd: were one lost per request, the
// root fd would close after enough of them and its number be reused.
func TestRootRefsBalanced(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	before := upstream.RootRefs(ts.srv)
	create(t, c, upstream.RootID, "f")
	for i := 0; i < 100; i++ {
		lookup(t, c, upstream.RootID, "f")
		must(t, c, upstream.OpGetattr, &upstream.NodeReq{Node: upstream.RootID}, &upstream.AttrResp{})
		must(t, c, upstream.OpStatfs, &upstream.Empty{}, &upstream.StatfsResp{})
	}
	if got := upstream.RootRefs(ts.srv); got != before {
		t.Errorf("root fd references: %d after 300 requests, %d before", got, before)
	}
}

// TestServerCloseReleasesFDs checks that a closed server holds no fds:
// not its export root, not those of sessions with open files.
func TestServerCloseReleasesFDs(t *testing.T) {
	cycle := func() {
		ts := startServer(t, upstream.ServerOptions{MaxFDs: 16})
		c := newClient(t, ts.addr, upstream.ClientOptions{Reconnect: time.Millisecond})
		holder, _ := lockedFile(t, c, 1)
		d := mkdir(t, c, upstream.RootID, "d")
		var oh upstream.OpenResp
		must(t, c, upstream.OpOpendir, &upstream.NodeReq{Node: d.Node}, &oh)
		read(t, c, holder, 0, 10)
		c.Close()
		ts.stop()
	}
	cycle() // the runtime's own fds (epoll and the like) open on first use
	base := openFDs(t)
	for i := 0; i < 3; i++ {
		cycle()
	}
	for deadline := time.Now().Add(callTimeout); openFDs(t) > base; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 3 servers closed: %d fds, want %d", openFDs(t), base)
		}
	}
}

//go:build linux

package upstream_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// Every request resolves node ids to fds beneath the export and works
// on single names there; these tests try to get out.

const secret = "outside the export"

// jail makes outer/export with outer/secret beside it, and serves the
// export.
func jail(t *testing.T, opts upstream.ServerOptions) (ts *testServer, outer string) {
	t.Helper()
	outer = t.TempDir()
	opts.Export = filepath.Join(outer, "export")
	if err := os.Mkdir(opts.Export, 0755); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	if err := os.WriteFile(filepath.Join(outer, "secret"), []byte(secret), 0600); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	return startServer(t, opts), outer
}

// checkOuter fails if anything beside the export changed.
func checkOuter(t *testing.T, outer string) {
	t.Helper()
	ents, _ := os.ReadDir(outer)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "export secret" {
		t.Errorf("beside the export: got %q, want \"export secret\"", got)
	}
	p := filepath.Join(outer, "secret")
	st, err := os.Stat(p)
	if err != nil || st.Mode() != 0600 {
		t.Fatalf("secret: %v %v", st.Mode(), err)
	}
	if got, _ := os.ReadFile(p); string(got) != secret {
		t.Errorf("secret now holds %q", got)
	}
	if n, err := unix.Listxattr(p, make([]byte, 256)); n > 0 || err != nil {
		t.Errorf("secret got xattrs (%d bytes, %v)", n, err)
	}
	if st.ModTime().Unix() < time.Now().Unix()-3600 {
		t.Errorf("secret's mtime was changed to %v", st.ModTime())
	}
}

func TestInvalidNames(t *testing.T) {
	ts, outer := jail(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	f, _ := create(t, c, upstream.RootID, "f")
	d := mkdir(t, c, upstream.RootID, "d")
	root := uint64(upstream.RootID)
	names := []string{"", ".", "..", "a/b", "../secret", "/", "a\x00b", strings.Repeat("x", 256)}
	for _, name := range names {
		ops := []struct {
			op  upstream.Op
			req any
		}{
			{upstream.OpLookup, &upstream.LookupReq{Parent: d.Node, Name: name}},
			{upstream.OpCreate, &upstream.CreateReq{Parent: d.Node, Name: name, Flags: syscall.O_RDWR, Mode: 0644}},
			{upstream.OpMkdir, &upstream.MknodReq{Parent: d.Node, Name: name, Mode: 0755}},
			{upstream.OpMknod, &upstream.MknodReq{Parent: d.Node, Name: name, Mode: syscall.S_IFREG | 0644}},
			{upstream.OpSymlink, &upstream.SymlinkReq{Parent: d.Node, Name: name, Target: "x"}},
			{upstream.OpLink, &upstream.LinkReq{Node: f.Node, NewParent: d.Node, NewName: name}},
			{upstream.OpUnlink, &upstream.UnlinkReq{Parent: d.Node, Name: name}},
			{upstream.OpRmdir, &upstream.UnlinkReq{Parent: d.Node, Name: name}},
			{upstream.OpRename, &upstream.RenameReq{Parent: root, Name: name, NewParent: d.Node, NewName: "n"}},
			{upstream.OpRename, &upstream.RenameReq{Parent: root, Name: "f", NewParent: d.Node, NewName: name}},
		}
		for _, o := range ops {
			err := try(c, o.op, o.req, &upstream.CreateResp{})
			if !errors.Is(err, syscall.EINVAL) && !(len(name) > 255 && errors.Is(err, syscall.ENAMETOOLONG)) {
				t.Errorf("%v %.10q: got %v, want EINVAL", o.op, name, err)
			}
		}
	}
	lookup(t, c, upstream.RootID, "f")
	checkOuter(t, outer)
}

// TestSymlinksOutside follows no symlink out: the symlink itself is the
// node, and nothing opens, changes or lists what it points to.
func TestSymlinksOutside(t *testing.T) {
	for _, handles := range []bool{true, false} {
		t.Run(map[bool]string{true: "handles", false: "paths"}[handles], func(t *testing.T) {
			ts, outer := jail(t, upstream.ServerOptions{NoFileHandles: !handles})
			skipWithoutHandles(t, ts, handles)
			os.Symlink(filepath.Join(outer, "secret"), filepath.Join(ts.export, "abs"))
			os.Symlink("../secret", filepath.Join(ts.export, "rel"))
			os.Symlink(outer, filepath.Join(ts.export, "dir"))
			c := newClient(t, ts.addr, upstream.ClientOptions{})
			var made upstream.EntryResp
			must(t, c, upstream.OpSymlink, &upstream.SymlinkReq{Parent: upstream.RootID, Name: "guest",
				Target: filepath.Join(outer, "secret")}, &made)
			for _, name := range []string{"abs", "rel", "dir", "guest"} {
				symlinkStaysPut(t, c, name)
			}
			checkOuter(t, outer)
		})
	}
}

func symlinkStaysPut(t *testing.T, c *upstream.Client, name string) {
	t.Helper()
	e := lookup(t, c, upstream.RootID, name)
	if e.Attr.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		t.Errorf("%s: mode %o, want a symlink", name, e.Attr.Mode)
	}
	err := try(c, upstream.OpOpen, &upstream.OpenReq{Node: e.Node, Flags: syscall.O_RDONLY}, &upstream.OpenResp{})
	if err == nil {
		t.Errorf("Open %s: succeeded", name)
	}
	err = try(c, upstream.OpOpen, &upstream.OpenReq{Node: e.Node, Flags: syscall.O_RDWR | syscall.O_TRUNC}, &upstream.OpenResp{})
	if err == nil {
		t.Errorf("Open %s O_TRUNC: succeeded", name)
	}
	err = try(c, upstream.OpCreate, &upstream.CreateReq{Parent: upstream.RootID, Name: name,
		Flags: syscall.O_RDWR | syscall.O_TRUNC, Mode: 0644}, &upstream.CreateResp{})
	wantErrno(t, "Create over "+name, err, syscall.ELOOP)
	wantErrno(t, "Opendir "+name, try(c, upstream.OpOpendir, &upstream.NodeReq{Node: e.Node}, &upstream.OpenResp{}), syscall.ENOTDIR)
	err = try(c, upstream.OpLookup, &upstream.LookupReq{Parent: e.Node, Name: "secret"}, &upstream.EntryResp{})
	wantErrno(t, "Lookup beneath "+name, err, syscall.ENOTDIR)
	err = try(c, upstream.OpCreate, &upstream.CreateReq{Parent: e.Node, Name: "new", Flags: syscall.O_RDWR, Mode: 0644}, &upstream.CreateResp{})
	wantErrno(t, "Create beneath "+name, err, syscall.ENOTDIR)
	err = try(c, upstream.OpSetxattr, &upstream.SetxattrReq{Node: e.Node, Name: "user.x", Data: []byte("1")}, &upstream.Empty{})
	if err == nil {
		t.Errorf("Setxattr on %s: succeeded", name)
	}
	var xa upstream.XattrResp
	if err := try(c, upstream.OpListxattr, &upstream.XattrReq{Node: e.Node, Size: 100}, &xa); err == nil && len(xa.Data) != 0 {
		t.Errorf("Listxattr %s: %q", name, xa.Data)
	}
	// Setattr changes the link, never its target.
	try(c, upstream.OpSetattr, &upstream.SetattrReq{Node: e.Node, Valid: upstream.SetSize, Size: 0}, &upstream.AttrResp{})
	try(c, upstream.OpSetattr, &upstream.SetattrReq{Node: e.Node, Valid: upstream.SetMode, Mode: 0777}, &upstream.AttrResp{})
	try(c, upstream.OpSetattr, &upstream.SetattrReq{Node: e.Node, Valid: upstream.SetMtime, Mtime: 1}, &upstream.AttrResp{})
	try(c, upstream.OpSetattr, &upstream.SetattrReq{Node: e.Node, Valid: upstream.SetUid | upstream.SetGid,
		Uid: 4242, Gid: 4242}, &upstream.AttrResp{})
	// A hard link of the symlink is another symlink, not the target.
	var hl upstream.EntryResp
	if err := try(c, upstream.OpLink, &upstream.LinkReq{Node: e.Node, NewParent: upstream.RootID, NewName: name + ".hard"}, &hl); err == nil {
		if hl.Entry.Attr.Mode&syscall.S_IFMT != syscall.S_IFLNK {
			t.Errorf("Link of %s: mode %o, want a symlink", name, hl.Entry.Attr.Mode)
		}
	}
}

// TestCreateOverSpecialFiles creates over names the host made: only a
// regular file is opened; a fifo must not block the server, a device
// must not be opened.
func TestCreateOverSpecialFiles(t *testing.T) {
	ts := startServer(t, upstream.ServerOptions{})
	if err := unix.Mkfifo(filepath.Join(ts.export, "fifo"), 0666); err != nil {
		t.Fatalf("Mkfifo: %v", err)
	}
	names := map[string]syscall.Errno{"fifo": syscall.EINVAL, "dir": syscall.EISDIR}
	os.Mkdir(filepath.Join(ts.export, "dir"), 0755)
	if unix.Mknod(filepath.Join(ts.export, "null"), unix.S_IFCHR|0666, int(unix.Mkdev(1, 3))) == nil {
		names["null"] = syscall.EINVAL
	}
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	for name, want := range names {
		for _, flags := range []uint32{syscall.O_RDONLY, syscall.O_WRONLY, syscall.O_RDWR} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.Call(ctx, upstream.OpCreate, &upstream.CreateReq{Parent: upstream.RootID, Name: name,
				Flags: flags, Mode: 0644}, &upstream.CreateResp{})
			cancel()
			wantErrno(t, "Create over "+name, err, want)
		}
	}
	lookup(t, c, upstream.RootID, "fifo")
}

func TestLinkAndRenameStayInside(t *testing.T) {
	ts, outer := jail(t, upstream.ServerOptions{})
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	a := mkdir(t, c, upstream.RootID, "a")
	b := mkdir(t, c, upstream.RootID, "b")
	f, h := create(t, c, a.Node, "f")
	write(t, c, h, 0, []byte("linked"))
	var hl upstream.EntryResp
	must(t, c, upstream.OpLink, &upstream.LinkReq{Node: f.Node, NewParent: b.Node, NewName: "g"}, &hl)
	if hl.Entry.Attr.Ino != f.Attr.Ino || hl.Entry.Attr.Nlink != 2 {
		t.Errorf("Link: ino %d nlink %d, want ino %d nlink 2", hl.Entry.Attr.Ino, hl.Entry.Attr.Nlink, f.Attr.Ino)
	}
	if got, err := os.ReadFile(filepath.Join(ts.export, "b", "g")); string(got) != "linked" {
		t.Errorf("host b/g: got %q %v", got, err)
	}
	must(t, c, upstream.OpRename, &upstream.RenameReq{Parent: b.Node, Name: "g", NewParent: upstream.RootID, NewName: "top"},
		&upstream.ChangedResp{})
	if _, err := os.Stat(filepath.Join(ts.export, "top")); err != nil {
		t.Errorf("host top: %v", err)
	}
	// A directory node as the parent of a name reaches that directory
	// only, even where ".." would lead out.
	err := try(c, upstream.OpRename, &upstream.RenameReq{Parent: upstream.RootID, Name: "top", NewParent: f.Node, NewName: "x"},
		&upstream.ChangedResp{})
	wantErrno(t, "Rename into a file", err, syscall.ENOTDIR)
	err = try(c, upstream.OpLink, &upstream.LinkReq{Node: a.Node, NewParent: b.Node, NewName: "dirlink"}, &upstream.EntryResp{})
	wantErrno(t, "Link of a directory", err, syscall.EPERM)
	checkOuter(t, outer)
}

// TestHostReplacesDir swaps a directory the guest knows for a symlink to
// the outside, on the host; the guest's node must not follow it, even
// when its fd has to be opened again.
func TestHostReplacesDir(t *testing.T) {
	for _, handles := range []bool{true, false} {
		t.Run(map[bool]string{true: "handles", false: "paths"}[handles], func(t *testing.T) {
			ts, outer := jail(t, upstream.ServerOptions{NoFileHandles: !handles, MaxFDs: 16})
			skipWithoutHandles(t, ts, handles)
			c := newClient(t, ts.addr, upstream.ClientOptions{})
			d := mkdir(t, c, upstream.RootID, "d")
			create(t, c, d.Node, "inside")
			os.Rename(filepath.Join(ts.export, "d"), filepath.Join(ts.export, "d.old"))
			os.Symlink(outer, filepath.Join(ts.export, "d"))
			evict(t, c, 40)
			err := try(c, upstream.OpLookup, &upstream.LookupReq{Parent: d.Node, Name: "secret"}, &upstream.EntryResp{})
			if err == nil {
				t.Fatalf("Lookup of secret through the replaced directory succeeded")
			}
			checkOuter(t, outer)
		})
	}
}

// TestHostMovesDirOutside moves a directory the guest knows out of the
// export, on the host: the guest's node must not reach it there.
func TestHostMovesDirOutside(t *testing.T) {
	for _, handles := range []bool{true, false} {
		t.Run(map[bool]string{true: "handles", false: "paths"}[handles], func(t *testing.T) {
			ts, outer := jail(t, upstream.ServerOptions{NoFileHandles: !handles, MaxFDs: 16})
			skipWithoutHandles(t, ts, handles)
			c := newClient(t, ts.addr, upstream.ClientOptions{})
			d := mkdir(t, c, upstream.RootID, "d")
			f, _ := create(t, c, d.Node, "f")
			os.Rename(filepath.Join(ts.export, "d"), filepath.Join(outer, "moved"))
			evict(t, c, 40)
			err := try(c, upstream.OpLookup, &upstream.LookupReq{Parent: d.Node, Name: "f"}, &upstream.EntryResp{})
			if err == nil {
				t.Errorf("Lookup beneath a directory moved out of the export succeeded")
			}
			err = try(c, upstream.OpCreate, &upstream.CreateReq{Parent: d.Node, Name: "new", Flags: syscall.O_RDWR, Mode: 0644},
				&upstream.CreateResp{})
			if err == nil {
				t.Errorf("Create beneath a directory moved out of the export succeeded")
			}
			err = try(c, upstream.OpOpen, &upstream.OpenReq{Node: f.Node, Flags: syscall.O_RDONLY}, &upstream.OpenResp{})
			if err == nil {
				t.Errorf("Open of a file moved out of the export succeeded")
			}
		})
	}
}

func skipWithoutHandles(t *testing.T, ts *testServer, handles bool) {
	if handles && !upstream.UsesHandles(ts.srv) {
		t.Skip("the server found file handles unusable on this export")
	}
}

// evict pushes the server's fds out of its cache by getting the
// attributes of n new files, which caches an fd for each.
func evict(t *testing.T, c *upstream.Client, n int) {
	t.Helper()
	e := mkdir(t, c, upstream.RootID, "evict"+strconv.Itoa(evictions))
	evictions++
	for i := 0; i < n; i++ {
		f, h := create(t, c, e.Node, "f"+strconv.Itoa(i))
		must(t, c, upstream.OpRelease, &upstream.HandleReq{Handle: h}, &upstream.Empty{})
		must(t, c, upstream.OpGetattr, &upstream.NodeReq{Node: f.Node}, &upstream.AttrResp{})
	}
}

var evictions int // names evict's directories; tests using it are not parallel

// TestApplyStaysInside sends write-back ops whose paths lead out of the
// export, through symlinks or "..", or name fifos: each must fail on its
// own, promptly, and change nothing outside.
func TestApplyStaysInside(t *testing.T) {
	ts, outer := jail(t, upstream.ServerOptions{})
	os.Symlink(filepath.Join(outer, "secret"), filepath.Join(ts.export, "l"))
	os.Symlink(outer, filepath.Join(ts.export, "dl"))
	os.WriteFile(filepath.Join(ts.export, "f"), []byte("f"), 0644)
	if err := unix.Mkfifo(filepath.Join(ts.export, "fifo"), 0666); err != nil {
		t.Fatalf("Mkfifo: %v", err)
	}
	c := newClient(t, ts.addr, upstream.ClientOptions{})
	// A mode change of a symlink may succeed, but must not reach its
	// target (checkOuter); the other ops must fail.
	var resp upstream.ApplyResp
	chmod := upstream.WBOp{Kind: upstream.WBSetattr, Path: "l", Valid: upstream.SetMode, Mode: 0777}
	must(t, c, upstream.OpApply, &upstream.ApplyReq{Ops: []upstream.WBOp{chmod}}, &resp)
	ops := []upstream.WBOp{
		{Kind: upstream.WBSetattr, Path: "l", Valid: upstream.SetSize},
		{Kind: upstream.WBWrite, Path: "l", Data: []byte("x"), First: true},
		{Kind: upstream.WBCreate, Path: "dl/new", Mode: 0644},
		{Kind: upstream.WBSetattr, Path: "dl/secret", Valid: upstream.SetMode, Mode: 0777},
		{Kind: upstream.WBUnlink, Path: "dl/secret"},
		{Kind: upstream.WBMkdir, Path: "../x", Mode: 0755},
		{Kind: upstream.WBCreate, Path: "/abs", Mode: 0644},
		{Kind: upstream.WBCreate, Path: "f/../../x", Mode: 0644},
		{Kind: upstream.WBUnlink, Path: "../secret"},
		{Kind: upstream.WBRename, Path: "f", Path2: "../f"},
		{Kind: upstream.WBRename, Path: "f", Path2: "dl/f"},
		{Kind: upstream.WBLink, Path: "f", Path2: "dl/f"},
		{Kind: upstream.WBSymlink, Path: "", Target: "x"},
		{Kind: upstream.WBWrite, Path: "fifo", Data: []byte("x")},
		{Kind: upstream.WBCreate, Path: "fifo", Mode: 0644},
		{Kind: upstream.WBSetattr, Path: "fifo", Valid: upstream.SetSize},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Call(ctx, upstream.OpApply, &upstream.ApplyReq{Ops: ops}, &resp); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for i, e := range resp.Errnos {
		if e == 0 {
			t.Errorf("op %d (%d %q %q) succeeded", i, ops[i].Kind, ops[i].Path, ops[i].Path2)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ts.export, "f")); string(got) != "f" {
		t.Errorf("f holds %q", got)
	}
	checkOuter(t, outer)
}

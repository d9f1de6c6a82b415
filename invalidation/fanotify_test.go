//go:build linux

package invalidation

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fanRecord encodes a fid info record as the kernel does.
func fanRecord(typ uint8, fs fsid, htype int32, handle []byte, name string) []byte {
	body := binary.LittleEndian.AppendUint32(nil, uint32(fs[0]))
	body = binary.LittleEndian.AppendUint32(body, uint32(fs[1]))
	body = binary.LittleEndian.AppendUint32(body, uint32(len(handle)))
	body = binary.LittleEndian.AppendUint32(body, uint32(htype))
	body = append(append(body, handle...), name...)
	body = append(body, 0)
	for (len(body)+4)%4 != 0 {
		body = append(body, 0)
	}
	hdr := []byte{typ, 0, 0, 0}
	binary.LittleEndian.PutUint16(hdr[2:], uint16(len(body)+4))
	return append(hdr, body...)
}

// fanMeta encodes an event: metadata, then info records.
func fanMeta(mask uint64, pid int32, info ...[]byte) []byte {
	b := make([]byte, sizeofFanMeta)
	b[4] = unix.FANOTIFY_METADATA_VERSION
	binary.LittleEndian.PutUint16(b[6:], uint16(sizeofFanMeta))
	binary.LittleEndian.PutUint64(b[8:], mask)
	binary.LittleEndian.PutUint32(b[16:], uint32(0xffffffff)) // FAN_NOFD
	binary.LittleEndian.PutUint32(b[20:], uint32(pid))
	for _, r := range info {
		b = append(b, r...)
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func TestFanotifyDecode(t *testing.T) {
	fs := fsid{7, 9}
	buf := fanMeta(unix.FAN_CREATE|unix.FAN_ONDIR, 42,
		fanRecord(unix.FAN_EVENT_INFO_TYPE_DFID_NAME, fs, 1, []byte{1, 2, 3, 4, 5, 6, 7, 8}, "name"))
	buf = append(buf, fanMeta(unix.FAN_RENAME, 43,
		fanRecord(unix.FAN_EVENT_INFO_TYPE_OLD_DFID_NAME, fs, 1, []byte{1}, "old"),
		fanRecord(unix.FAN_EVENT_INFO_TYPE_NEW_DFID_NAME, fs, 1, []byte{2}, "new"))...)
	ev, rest, err := nextFanEvent(buf)
	if err != nil {
		t.Fatalf("nextFanEvent: %v", err)
	}
	if ev.mask != unix.FAN_CREATE|unix.FAN_ONDIR || ev.pid != 42 || ev.fd != -1 {
		t.Errorf("metadata %+v", ev)
	}
	if d := ev.dir; d.fsid != fs || d.htype != 1 || len(d.handle) != 8 || d.handle[7] != 8 || d.name != "name" {
		t.Errorf("dfid_name %+v", d)
	}
	ev, rest, err = nextFanEvent(rest)
	if err != nil || len(rest) != 0 {
		t.Fatalf("second event: %v, %d bytes left", err, len(rest))
	}
	if ev.old.name != "old" || ev.new.name != "new" || ev.old.key == ev.new.key {
		t.Errorf("rename old %+v new %+v", ev.old, ev.new)
	}
	if _, _, err := nextFanEvent(buf[:30]); err == nil {
		t.Error("a truncated event decoded")
	}
}

func TestFanotifyMergedOps(t *testing.T) {
	exists := func(v bool) func() bool { return func() bool { return v } }
	cases := []struct {
		mask   uint64
		exists bool
		want   []Op
	}{
		{unix.FAN_CREATE | unix.FAN_MODIFY | unix.FAN_CLOSE_WRITE | unix.FAN_ATTRIB, true, []Op{Create, Modify, Attrib}},
		{unix.FAN_CREATE | unix.FAN_DELETE, false, []Op{Create, Delete}},
		{unix.FAN_CREATE | unix.FAN_DELETE, true, []Op{Delete, Create}},
		{unix.FAN_MODIFY | unix.FAN_DELETE, false, []Op{Modify, Delete}},
		{unix.FAN_CLOSE_WRITE, true, []Op{Modify}},
	}
	for _, c := range cases {
		if got := opsOf(c.mask, exists(c.exists)); !slices.Equal(got, c.want) {
			t.Errorf("opsOf(%#x, exists %v) = %v, want %v", c.mask, c.exists, got, c.want)
		}
	}
}

// newTestGroup opens a fanotify group without starting its reader, or
// skips.
func newTestGroup(t *testing.T) *fanGroup {
	t.Helper()
	mfd, err := unix.Open(os.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(mfd)
	g, err := newFanGroup(mfd, nil, &counters{})
	if err != nil {
		t.Skipf("no fanotify here: %v", err)
	}
	t.Cleanup(func() { g.close() })
	return g
}

// TestFanotifyInjectedOverflow feeds a FAN_Q_OVERFLOW record to the
// decoder: every root of every watcher overflows, and it is counted.
func TestFanotifyInjectedOverflow(t *testing.T) {
	g := newTestGroup(t)
	a, b := t.TempDir(), t.TempDir()
	var ra, rb recorder
	wa, wb := g.newWatcher(ra.add), g.newWatcher(rb.add)
	for _, x := range []struct {
		w *fanWatcher
		p string
	}{{wa, a}, {wa, b}, {wb, b}} {
		if err := x.w.AddTree(dirFD(t, x.p)); err != nil {
			t.Fatalf("AddTree: %v", err)
		}
	}
	g.parse(fanMeta(unix.FAN_Q_OVERFLOW, 0))
	ovf := func(r *recorder) (inos []uint64) {
		for _, c := range r.named("") {
			if c.Op == Overflow && c.DirIno == c.RootIno {
				inos = append(inos, c.RootIno)
			}
		}
		slices.Sort(inos)
		return inos
	}
	wantA := []uint64{inoOf(t, a), inoOf(t, b)}
	slices.Sort(wantA)
	if got := ovf(&ra); !slices.Equal(got, wantA) {
		t.Errorf("watcher a overflowed roots %v, want %v", got, wantA)
	}
	if got := ovf(&rb); !slices.Equal(got, []uint64{inoOf(t, b)}) {
		t.Errorf("watcher b overflowed roots %v, want [%d]", got, inoOf(t, b))
	}
	if n := g.c.overflows.Load(); n != 3 {
		t.Errorf("overflows counted %d, want 3", n)
	}
}

// TestFanotifyQueueOverflow fills the kernel's queue while the reader is
// not running: the overflow reaches the watcher as an Overflow of its
// root.
func TestFanotifyQueueOverflow(t *testing.T) {
	g := newTestGroup(t)
	limit := 16384
	if b, err := os.ReadFile("/proc/sys/fs/fanotify/max_queued_events"); err == nil {
		limit, _ = strconv.Atoi(string(b[:len(b)-1]))
	}
	if limit > 1<<16 {
		t.Skipf("fanotify queue holds %d events: too many to fill in a test", limit)
	}
	root := t.TempDir()
	var r recorder
	w := g.newWatcher(r.add)
	if err := w.AddTree(dirFD(t, root)); err != nil {
		t.Fatalf("AddTree: %v", err)
	}
	dfd := dirFD(t, root)
	for i := range limit + 100 {
		if err := unix.Mknodat(dfd, "f"+strconv.Itoa(i), unix.S_IFREG|0644, 0); err != nil {
			t.Fatalf("mknod: %v", err)
		}
	}
	g.start()
	r.wait(t, Overflow, "")
	if g.c.overflows.Load() == 0 {
		t.Error("overflow not counted")
	}
	os.WriteFile(filepath.Join(root, "after"), nil, 0644)
	r.wait(t, Create, "after")
}

// TestFanotifyRestart breaks the group's fd under the reader: a new
// group takes over with the same marks, and the roots overflow.
func TestFanotifyRestart(t *testing.T) {
	g := newTestGroup(t)
	root := t.TempDir()
	var r recorder
	w := g.newWatcher(r.add)
	if err := w.AddTree(dirFD(t, root)); err != nil {
		t.Fatalf("AddTree: %v", err)
	}
	g.start()
	os.WriteFile(filepath.Join(root, "before"), nil, 0644)
	r.wait(t, Create, "before")
	g.mu.Lock()
	f := g.f
	g.mu.Unlock()
	f.Close()
	r.wait(t, Overflow, "")
	os.WriteFile(filepath.Join(root, "after"), nil, 0644)
	r.wait(t, Create, "after")
	if n := g.c.restarts.Load(); n != 1 {
		t.Errorf("restarts %d, want 1", n)
	}
}

// TestFanotifyOwnCloseWrite checks that the server's own FAN_CLOSE_WRITE
// (a file it opened for writing and did not write) raises nothing.
func TestFanotifyOwnCloseWrite(t *testing.T) {
	h := newTestHub(t, Fanotify)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "f"), nil, 0644)
	_, r := watchTrees(t, h, root)
	f, err := os.OpenFile(filepath.Join(root, "f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.WriteFile(filepath.Join(root, "marker"), nil, 0644)
	r.wait(t, Create, "marker")
	if cs := r.named("f"); len(cs) != 0 {
		t.Errorf("our own close raised %+v", cs)
	}
}

func TestHubKind(t *testing.T) {
	for _, s := range []string{"auto", "inotify", "fanotify"} {
		if k, err := ParseKind(s); err != nil || k.String() != s {
			t.Errorf("ParseKind(%q) = %v, %v", s, k, err)
		}
	}
	if _, err := ParseKind("dnotify"); err == nil {
		t.Error("ParseKind accepted dnotify")
	}
	t.Setenv(EnvKind, "inotify")
	if h := newTestHub(t, Auto); h.Kind() != Inotify || h.Stats().Kind != Inotify {
		t.Errorf("auto with $%s=inotify chose %v", EnvKind, h.Kind())
	}
	t.Setenv(EnvKind, "")
	switch h := newTestHub(t, Auto); {
	case h.Kind() == Fanotify:
	case h.Stats().Fallback == "":
		t.Errorf("auto chose %v without saying why", h.Kind())
	default:
		t.Logf("auto chose inotify: %s", h.Stats().Fallback)
	}
}

// TestFanotifyBindMountFallsBack watches a tree through a bind mount, a
// path the group's handle resolution would never give: the tree goes
// to inotify, and its events still arrive.
func TestFanotifyBindMountFallsBack(t *testing.T) {
	h := newTestHub(t, Fanotify)
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	os.Mkdir(src, 0755)
	os.Mkdir(dst, 0755)
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dst, unix.MNT_DETACH) })
	w, r := watchTrees(t, h, dst)
	os.WriteFile(filepath.Join(src, "f"), nil, 0644)
	r.wait(t, Create, "f")
	if fw := w.(*fanWatcher); fw.ino == nil {
		t.Error("the tree was not handed to inotify")
	}
}

// TestFanotifyUnwatched writes in an unwatched tree (a guest's state
// directory and its staging files) on the filesystem of a watched tree,
// a tmpfs of the test's own: fanotify delivers none of those events,
// and the watched tree's still arrive.
func TestFanotifyUnwatched(t *testing.T) {
	h, r, disk := unwatchedHub(t, "data")
	export, state := filepath.Join(disk, "export"), filepath.Join(disk, "state")

	for i := range 20 { // as staging files and the journal are used
		p := filepath.Join(state, "data", strconv.Itoa(i))
		if err := os.WriteFile(p, []byte("staged"), 0600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0644)
		os.Truncate(p, 0)
		os.Remove(p)
		os.WriteFile(filepath.Join(state, "journal"), []byte(p), 0600)
	}
	os.WriteFile(filepath.Join(export, "marker"), nil, 0644)
	r.wait(t, Create, "marker") // read after every event before it
	st := h.Stats()
	t.Logf("%d events read, %d filtered", st.Events, st.Filtered)
	if st.Filtered != 0 {
		t.Errorf("%d events filtered (outside the watched tree); want none from the unwatched tree", st.Filtered)
	}
}

// TestFanotifyUnwatchedNewDirs: directories made in an unwatched tree
// after it was marked, or moved into it, get ignore marks of their own:
// the writes in them are not read (an overlay's upper directory is made
// after the state directory was marked, and an untar into it makes
// thousands more).
func TestFanotifyUnwatchedNewDirs(t *testing.T) {
	h, r, disk := unwatchedHub(t)
	export, state := filepath.Join(disk, "export"), filepath.Join(disk, "state")
	marked := func(n uint64) {
		t.Helper()
		for i := 0; h.Stats().UnwatchedDirs < n; i++ {
			if i == 500 {
				t.Fatalf("%d new directories marked, want %d", h.Stats().UnwatchedDirs, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	upper, deep := filepath.Join(state, "u"), filepath.Join(state, "u", "deep")
	os.Mkdir(upper, 0755)
	marked(1)
	os.Mkdir(deep, 0755)
	marked(2)
	other := filepath.Join(disk, "other")
	os.Mkdir(other, 0755)
	moved := filepath.Join(upper, "moved")
	if err := os.Rename(other, moved); err != nil {
		t.Fatal(err)
	}
	marked(3)
	os.WriteFile(filepath.Join(export, "marker0"), nil, 0644)
	r.wait(t, Create, "marker0") // every event before it read and counted
	before := h.Stats().Filtered
	for _, dir := range []string{deep, moved} {
		for i := range 20 {
			p := filepath.Join(dir, strconv.Itoa(i))
			os.WriteFile(p, []byte("upper"), 0600)
			os.Chmod(p, 0644)
			os.Remove(p)
		}
	}
	os.WriteFile(filepath.Join(export, "marker"), nil, 0644)
	r.wait(t, Create, "marker")
	if n := h.Stats().Filtered - before; n != 0 {
		t.Errorf("%d events read and filtered from the new directories, want none", n)
	}
}

// unwatchedHub mounts a tmpfs of the test's own, the disk, holding
// export/ and state/ (with state's subdirectories sub), and starts a
// fanotify Hub whose unwatched tree is state, watching export.
func unwatchedHub(t *testing.T, sub ...string) (*Hub, *recorder, string) {
	t.Helper()
	disk := t.TempDir()
	if err := unix.Mount("tmpfs", disk, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(disk, unix.MNT_DETACH) })
	export, state := filepath.Join(disk, "export"), filepath.Join(disk, "state")
	dirs := []string{export, state}
	for _, d := range sub {
		dirs = append(dirs, filepath.Join(state, d))
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0755); err != nil {
			t.Fatal(err)
		}
	}
	mfd, err := unix.Open(disk, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(mfd)
	h, err := NewHub(HubOptions{Kind: Fanotify, MountFD: mfd, Unwatched: []string{state}})
	if err != nil {
		t.Skipf("no fanotify here: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	_, r := watchTrees(t, h, export)
	return h, r, disk
}

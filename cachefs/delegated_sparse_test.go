package cachefs_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// vm returns a field of /proc/self/status (VmRSS, VmHWM) in bytes.
func vm(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			var kb int64
			fmt.Sscanf(string(bytes.TrimSpace(v)), "%d kB", &kb)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// allocated returns the bytes a file has allocated.
func allocated(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatalf("Stat: %v", err)
	}
	return st.Blocks * 512
}

// TestDelegatedSparseWriteBack writes a sparse file of 2 GiB in a
// delegated subtree, with a MiB of data at its start and a byte at its
// end: the staged bytes count its data, not its size; the host's copy
// after a flush keeps the holes; an append after the guest let go of
// its copy copies the host's file back in its data ranges; and the
// daemon's memory peak (this process's) grows by far less than 2 GiB.
func TestDelegatedSparseWriteBack(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	base := vm(t, "VmRSS")
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset VmHWM: %v", err)
	}
	const end = 2<<30 + 1
	p := filepath.Join(env.Mountpoint, "sparse")
	head := bytes.Repeat([]byte{0xab}, 1<<20)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0644)
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	f.Write(head)
	if _, err := f.WriteAt([]byte("x"), end); err != nil {
		t.Fatalf("WriteAt: %v", err)
	}
	if staged, _ := env.FS.StagedBytes(); staged > 16<<20 {
		t.Errorf("staged bytes %d for 1 MiB of data, want the holes not counted", staged)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
	host := filepath.Join(export, "sparse")
	if a := allocated(t, host); a > 16<<20 {
		t.Errorf("host allocated %d bytes for 1 MiB of data: the holes were filled", a)
	}
	eventually(t, "staging copy dropped", func() bool { _, n := env.FS.StagedBytes(); return n == 0 })
	g, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	if _, err := g.Write([]byte("y")); err != nil {
		t.Fatalf("append: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
	hf, err := os.Open(host)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer hf.Close()
	got := make([]byte, 4)
	n, _ := hf.ReadAt(got, end-1)
	if string(got[:n]) != "\x00xy" {
		t.Errorf("host file's end %q, want %q", got[:n], "\x00xy")
	}
	first := make([]byte, len(head))
	hf.ReadAt(first, 0)
	if !bytes.Equal(first, head) {
		t.Errorf("host file's first MiB changed")
	}
	if a := allocated(t, host); a > 16<<20 {
		t.Errorf("host allocated %d bytes after the append: the holes were filled", a)
	}
	grew := vm(t, "VmHWM") - base
	t.Logf("memory peak grew by %d MiB", grew>>20)
	if grew > 256<<20 {
		t.Errorf("memory peak grew by %d MiB for a sparse file of 2 GiB", grew>>20)
	}
}

// TestDelegatedTimesWriteBack makes symlinks and files, some with times
// of the past, in a delegated subtree and flushes: the host has the
// guest's modification times, not the write-back's. (Directories are
// not checked: the host's change as the write-back adds their entries.)
func TestDelegatedTimesWriteBack(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	env.FS.HoldWriteback(true)
	l := filepath.Join(env.Mountpoint, "link")
	if err := os.Symlink("target", l); err != nil {
		t.Fatalf("Symlink: %v", err)
	}
	old := []unix.Timespec{unix.NsecToTimespec(1e18), unix.NsecToTimespec(1.5e18)}
	p := filepath.Join(env.Mountpoint, "old")
	os.WriteFile(p, []byte("data"), 0644)
	os.Symlink("target2", p+"link")
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p+"link", old, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatalf("utimensat of a symlink: %v", err)
	}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, old, 0); err != nil {
		t.Fatalf("utimensat: %v", err)
	}
	os.WriteFile(filepath.Join(env.Mountpoint, "new"), []byte("data"), 0644)
	if err := unix.Mknod(filepath.Join(env.Mountpoint, "node"), unix.S_IFREG|0644, 0); err != nil {
		t.Fatalf("Mknod: %v", err)
	}
	os.Mkdir(filepath.Join(env.Mountpoint, "dir"), 0755)
	os.WriteFile(filepath.Join(env.Mountpoint, "dir", "f"), []byte("data"), 0644)
	guest := map[string]unix.Stat_t{}
	for _, name := range []string{"link", "old", "oldlink", "new", "node", "dir/f"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(env.Mountpoint, name), &st); err != nil {
			t.Fatalf("Lstat: %v", err)
		}
		guest[name] = st
	}
	env.FS.HoldWriteback(false)
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
	for name, g := range guest {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(export, name), &st); err != nil {
			t.Fatalf("Lstat: %v", err)
		}
		if st.Mtim != g.Mtim {
			t.Errorf("%s: host mtime %v, guest's %v", name, time.Unix(st.Mtim.Unix()), time.Unix(g.Mtim.Unix()))
		}
	}
}

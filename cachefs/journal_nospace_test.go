package cachefs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// stateTmpfs mounts a tmpfs of size bytes for a state directory,
// unmounted when the test ends.
func stateTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fillUp writes a file in dir until its filesystem is full and returns
// its path.
func fillUp(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for err == nil {
		_, err = f.Write(buf)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
	}
	return p
}

// journalFile returns the journal's inode number and its whole lines.
func journalFile(t *testing.T, state string) (uint64, string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(state, "journal"), &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(state, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	_, lines := journalLayout(t, state)
	return st.Ino, string(b[:lines])
}

// TestJournalRewriteNoSpace: on a full state directory, closes of
// written files (which queue their contents without asking for room)
// fill the journal, and their records wait in memory. Writing the
// journal anew then fails for want of space: the old journal stays as
// it was, changes and fsync fail with ENOSPC, and once space is freed
// the next change journals the records kept in memory, so that a daemon
// killed then replays every change.
func TestJournalRewriteNoSpace(t *testing.T) {
	export, state := t.TempDir(), stateTmpfs(t, 2<<20)
	env := startDelegated(t, export, state)
	env.FS.HoldWriteback(true)
	// Released before it closes: a fsync waits for the host.
	t.Cleanup(func() { env.FS.HoldWriteback(false) })
	long := strings.Repeat("x", 200) // long paths: large records
	var files []*os.File
	for i := range 100 {
		f, err := os.Create(filepath.Join(env.Mountpoint, fmt.Sprintf("%s%03d", long, i)))
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if _, err := f.Write([]byte{byte(i)}); err != nil {
			t.Fatalf("Write: %v", err)
		}
		files = append(files, f)
	}
	filler := fillUp(t, state)
	var dirs []string
	for i := 0; ; i++ { // until the journal has no room for a change
		name := fmt.Sprintf("m%04d", i)
		err := os.Mkdir(filepath.Join(env.Mountpoint, name), 0755)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatalf("Mkdir: %v", err)
		}
		dirs = append(dirs, name)
	}
	for _, f := range files[1:] { // the first stays open to fsync
		if err := f.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	pending := env.FS.Stats().Writeback.Pending
	if n := journalRecords(t, state); uint64(n) >= pending {
		t.Fatalf("journal holds %d records of the %d that wait; want some kept in memory", n, pending)
	}

	ino, lines := journalFile(t, state)
	env.FS.RewriteJournal()
	if ino2, lines2 := journalFile(t, state); ino2 != ino || lines2 != lines {
		t.Errorf("journal after a rewrite without space: inode %d, %d bytes of lines; want it as it was (inode %d, %d bytes)", ino2, len(lines2), ino, len(lines))
	}
	if _, err := os.Lstat(filepath.Join(state, "journal.new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal.new after a failed rewrite: %v, want it removed", err)
	}
	if err := os.Mkdir(filepath.Join(env.Mountpoint, "refused"), 0755); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("mkdir with records kept in memory: %v, want ENOSPC", err)
	}
	if err := files[0].Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("fsync with records kept in memory: %v, want ENOSPC", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	mkdirs(t, env.Mountpoint, "after") // journals what was kept in memory first
	files[0].Close()
	crashAndReplay(t, env, export, state, pending+2)
	for i := range files {
		name := fmt.Sprintf("%s%03d", long, i)
		if b, err := os.ReadFile(filepath.Join(export, name)); err != nil || len(b) != 1 || b[0] != byte(i) {
			t.Errorf("host %s: %v, %v; want [%d]", name[len(long):], b, err, i)
		}
	}
	for _, n := range append(dirs, "after") {
		if fi, err := os.Stat(filepath.Join(export, n)); err != nil || !fi.IsDir() {
			t.Errorf("host %s: %v; want a directory", n, err)
		}
	}
}

package cachefs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cachefs/cachefs/internal/harness"
	"golang.org/x/sys/unix"
)

// writeBlocks writes n blocks of 1 KiB to f, each filled with its index.
func writeBlocks(t *testing.T, f *os.File, n int) []byte {
	t.Helper()
	var all []byte
	for i := 0; i < n; i++ {
		b := bytes.Repeat([]byte{byte('a' + i%26)}, 1024)
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// The kernel writes a delegated file's staging copy itself: 1 KiB writes
// reach neither the daemon nor the host, and size, contents and times
// are right in the guest while the file is open and on the host after
// write-back.
func TestPassthroughWritesSkipDaemon(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	p := filepath.Join(env.Mountpoint, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	before := requests(env)
	want := writeBlocks(t, f, 1000)
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil || st.Size != int64(len(want)) {
		t.Errorf("stat while open: size %d (%v), want %d", st.Size, err, len(want))
	}
	f.Close()
	wb := env.FS.Stats().Writeback
	if wb.Passthrough == 0 {
		t.Skipf("the kernel did not pass the file through (stats %+v)", wb)
	}
	if wb.LocalWrites != 0 {
		t.Errorf("%d writes reached the daemon, want none", wb.LocalWrites)
	}
	if n := requests(env) - before; n > 5 {
		t.Errorf("1000 writes sent %d upstream requests", n)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
		t.Errorf("guest reads %d bytes back, want %d written", len(got), len(want))
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
	if got, _ := os.ReadFile(filepath.Join(export, "f")); !bytes.Equal(got, want) {
		t.Errorf("host has %d bytes after write-back, want %d", len(got), len(want))
	}
	var hst unix.Stat_t
	unix.Stat(filepath.Join(export, "f"), &hst)
	unix.Stat(p, &st)
	if hst.Mtim != st.Mtim {
		t.Errorf("host mtime %v, guest %v", hst.Mtim, st.Mtim)
	}
}

// A host file open for reading keeps the inode out of passthrough: a
// writer opening it meanwhile goes through the daemon instead of failing.
func TestPassthroughYieldsToOpenHostFile(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("host data"), 0644)
	env := startDelegated(t, export, t.TempDir())
	p := filepath.Join(env.Mountpoint, "f")
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	r.Read(buf)
	env.FS.HoldWriteback(true)
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("open for writing while a host handle is open: %v", err)
	}
	if _, err := w.WriteAt([]byte("HOST"), 0); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// The reader's page cache dropped, its reads come from the guest's
	// copy, not from the host, which has not had the write yet.
	unix.Fadvise(int(r.Fd()), 0, 0, unix.FADV_DONTNEED)
	if n, _ := r.ReadAt(buf, 0); string(buf[:n]) != "HOST" {
		t.Errorf("the reader opened before the write reads %q, want \"HOST\"", buf[:n])
	}
	env.FS.HoldWriteback(false)
	r.Close()
	wb := env.FS.Stats().Writeback
	if wb.Passthrough != 0 || wb.LocalWrites == 0 {
		t.Errorf("stats %+v: want the write through the daemon, no passthrough", wb)
	}
	// With nothing open, the next open passes the staging file through.
	w, err = os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("!"))
	w.Close()
	if got, _ := os.ReadFile(p); string(got) != "HOST data!" {
		t.Errorf("guest reads %q", got)
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back failures: %+v", failed)
	}
	if got, _ := os.ReadFile(filepath.Join(export, "f")); string(got) != "HOST data!" {
		t.Errorf("host has %q", got)
	}
}

// Writes through a shared mapping of a passed-through file, truncation
// and fsync while open all reach the host.
func TestPassthroughMmapTruncateFsync(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	p := filepath.Join(env.Mountpoint, "m")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(8192); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	// Through the kernel (kernelCopy): a page fault in Go code on a file
	// this process serves could deadlock it.
	if err := kernelCopy(m[4096:4096+6], []byte("mapped"), true); err != nil {
		t.Fatal(err)
	}
	unix.Msync(m, unix.MS_SYNC)
	unix.Munmap(m)
	if err := f.Truncate(4096 + 6); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // waits for the host
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(export, "m"))
	if len(got) != 4102 || string(got[4096:]) != "mapped" {
		t.Errorf("host has %d bytes ending %q after fsync, want 4102 ending \"mapped\"", len(got), got[min(len(got), 4096):])
	}
	var st syscall.Stat_t
	syscall.Stat(p, &st)
	if st.Size != 4102 {
		t.Errorf("guest size %d, want 4102", st.Size)
	}
}

// createDelegated mounts a new export delegated and creates file f in
// it, open until the test ends.
func createDelegated(t *testing.T) (string, *harness.Env, *os.File) {
	t.Helper()
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	f, err := os.Create(filepath.Join(env.Mountpoint, "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return export, env, f
}

// Each fsync of a passthrough handle sends what was written since the
// one before: the kernel's writes are not seen, the staging file's
// change is.
func TestPassthroughFsyncAfterFsync(t *testing.T) {
	export, env, f := createDelegated(t)
	want := ""
	for _, part := range []string{"first;", "second;", "third"} {
		if _, err := f.WriteString(part); err != nil {
			t.Fatal(err)
		}
		want += part
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync: %v", err)
		}
		if b, _ := os.ReadFile(filepath.Join(export, "f")); string(b) != want {
			t.Errorf("host after fsync: %q, want %q", b, want)
		}
	}
	if env.FS.Stats().Writeback.Passthrough == 0 {
		t.Skip("the kernel did not pass the file through")
	}
}

// A flush for the host takes what files still open have written.
func TestWriteBackTakesOpenFiles(t *testing.T) {
	export, env, f := createDelegated(t)
	if _, err := f.WriteString("written, not closed"); err != nil {
		t.Fatal(err)
	}
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %v", failed)
	}
	if b, err := os.ReadFile(filepath.Join(export, "f")); err != nil || string(b) != "written, not closed" {
		t.Errorf("host f after the flush: %q, %v", b, err)
	}
}

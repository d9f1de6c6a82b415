//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestGuestKilledDelegated kills a delegated mount's daemon with SIGKILL
// and starts it again on the same state directory. Files fsynced before
// are on the host as soon as fsync returns; the changes made after, with
// the host server stopped so that only the journal holds them (files
// closed, a directory, a rename, an unlink, and a file whose fsync is
// still waiting), are on the host once the new daemon has replayed the
// journal: the host tree equals the same changes made on a plain
// directory.
func TestGuestKilledDelegated(t *testing.T) {
	requireFUSE(t)
	p, model, state := newPaths(t), t.TempDir(), t.TempDir()
	srv := startServe(t, p.export, p.sock, false)
	guest := startDelegatedMount(t, p, state)
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("synced%02d", i)
		both(t, p.mnt, model, func(root string) error { return writeSynced(root, name, i) })
		wantContent(t, filepath.Join(p.export, name), pattern(i, 10000+i))
	}

	srv.cmd.Process.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { srv.cmd.Process.Signal(syscall.SIGCONT) })
	journaledChanges(t, p.mnt, model)
	pending := ctlStats(t, p.ctl).Writeback.Pending
	blocked := make(chan error, 1)
	go func() { blocked <- writeSynced(p.mnt, "fsync-waits", 100) }()
	writeSynced(model, "fsync-waits", 100)
	// Its create and its contents are queued (and journaled) when fsync
	// starts waiting for the host.
	waitFor(t, 10*time.Second, "the fsync to queue the file", func() bool {
		return ctlStats(t, p.ctl).Writeback.Pending >= pending+2
	})
	if len(blocked) > 0 {
		t.Fatalf("fsync returned with the host stopped: %v", <-blocked)
	}

	guest.kill(t)
	unix.Unmount(p.mnt, unix.MNT_DETACH)
	os.Remove(p.ctl) // the killed daemon's: wait for the next one's
	srv.cmd.Process.Signal(syscall.SIGCONT)
	startDelegatedMount(t, p, state) // replays the journal before mounting
	want := treeOf(t, model)
	sameTree(t, "host after the restart", treeOf(t, p.export), want)
	sameTree(t, "mount after the restart", treeOf(t, p.mnt), want)
}

// both makes a change under the mount and the same on the model.
func both(t *testing.T, mnt, model string, change func(root string) error) {
	t.Helper()
	if err := change(model); err != nil {
		t.Fatalf("on the plain directory: %v", err)
	}
	if err := within(t, "a change through the mount", func() error { return change(mnt) }); err != nil {
		t.Fatalf("through the mount: %v", err)
	}
}

// writeSynced writes file name of root with pattern id and fsyncs it.
func writeSynced(root, name string, id int) error {
	f, err := os.OpenFile(filepath.Join(root, name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(pattern(id, 10000+id)); err != nil {
		return err
	}
	return f.Sync()
}

// journaledChanges makes changes that a delegated mount completes
// without the host: new files, a directory, a rename and an unlink.
// (An unlink of a file the guest did not make asks the host for its
// attributes first.)
func journaledChanges(t *testing.T, mnt, model string) {
	t.Helper()
	both(t, mnt, model, func(root string) error { return os.Mkdir(filepath.Join(root, "dir"), 0o755) })
	for i := 0; i < 20; i++ {
		name := filepath.Join("dir", fmt.Sprintf("closed%02d", i))
		both(t, mnt, model, func(root string) error {
			return os.WriteFile(filepath.Join(root, name), pattern(50+i, 5000+i), 0o644)
		})
	}
	both(t, mnt, model, func(root string) error {
		return os.Rename(filepath.Join(root, "synced00"), filepath.Join(root, "dir", "moved"))
	})
	both(t, mnt, model, func(root string) error { return os.Remove(filepath.Join(root, "dir", "closed19")) })
}

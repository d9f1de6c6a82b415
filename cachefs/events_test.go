package cachefs_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// startWatched mounts export with a subtree "w" registered cached and a
// cache TTL far beyond the test: only host events can refresh it.
func startWatched(t *testing.T) (*harness.Env, string, string) {
	t.Helper()
	export := t.TempDir()
	os.MkdirAll(filepath.Join(export, "w", "sub"), 0755)
	os.WriteFile(filepath.Join(export, "w", "f"), []byte("one"), 0644)
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Consistent),
		CacheTTL: time.Hour})
	env.FS.Register("w", consistency.Cached)
	return env, filepath.Join(export, "w"), filepath.Join(env.Mountpoint, "w")
}

// eventually polls cond until it holds or 5 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not seen within 5s", what)
}

func TestHostChangesReachCachedSubtree(t *testing.T) {
	env, host, guest := startWatched(t)
	if got, _ := os.ReadFile(filepath.Join(guest, "f")); string(got) != "one" {
		t.Fatalf("read %q, want one", got)
	}
	if _, err := os.Stat(filepath.Join(guest, "new")); !os.IsNotExist(err) {
		t.Fatalf("stat of missing file: %v", err)
	}
	os.ReadDir(guest)
	os.WriteFile(filepath.Join(host, "f"), []byte("two, longer"), 0644)
	eventually(t, "host edit", func() bool {
		got, _ := os.ReadFile(filepath.Join(guest, "f"))
		return string(got) == "two, longer"
	})
	os.WriteFile(filepath.Join(host, "new"), []byte("n"), 0644)
	eventually(t, "host create", func() bool { _, err := os.Stat(filepath.Join(guest, "new")); return err == nil })
	eventually(t, "host create in listing", func() bool { return listed(guest, "new") })
	os.Rename(filepath.Join(host, "new"), filepath.Join(host, "sub", "moved"))
	eventually(t, "host rename", func() bool {
		_, err1 := os.Stat(filepath.Join(guest, "new"))
		_, err2 := os.Stat(filepath.Join(guest, "sub", "moved"))
		return os.IsNotExist(err1) && err2 == nil
	})
	os.Remove(filepath.Join(host, "f"))
	eventually(t, "host delete", func() bool { _, err := os.Stat(filepath.Join(guest, "f")); return os.IsNotExist(err) })
	st := env.FS.Stats().Events
	if st.Batches == 0 || st.Events == 0 {
		t.Errorf("event stats %+v: want batches and events counted", st)
	}
}

func listed(dir, name string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() == name {
			return true
		}
	}
	return false
}

// inotifyWatch watches dir and returns a function that waits for an
// event of mask on name.
func inotifyWatch(t *testing.T, dir string) func(mask uint32, name string) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_ALL_EVENTS); err != nil {
		t.Fatalf("inotify_add_watch: %v", err)
	}
	var seen []string
	return func(mask uint32, name string) {
		t.Helper()
		buf := make([]byte, 64<<10)
		eventually(t, "inotify "+maskName(mask)+" "+name+" (seen: "+strings.Join(seen, ", ")+")", func() bool {
			n, _ := unix.Read(fd, buf)
			for b := buf[:max(n, 0)]; len(b) >= unix.SizeofInotifyEvent; {
				m := binary.LittleEndian.Uint32(b[4:])
				l := int(binary.LittleEndian.Uint32(b[12:]))
				nm := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+l], "\x00"))
				seen = append(seen, maskName(m)+":"+nm)
				b = b[unix.SizeofInotifyEvent+l:]
			}
			for _, s := range seen {
				if s == maskName(mask)+":"+name {
					return true
				}
			}
			return false
		})
	}
}

func maskName(m uint32) string {
	names := []struct {
		m uint32
		s string
	}{{unix.IN_CREATE, "CREATE"}, {unix.IN_DELETE, "DELETE"}, {unix.IN_MODIFY, "MODIFY"},
		{unix.IN_ATTRIB, "ATTRIB"}, {unix.IN_MOVED_FROM, "MOVED_FROM"}, {unix.IN_MOVED_TO, "MOVED_TO"}}
	var out []string
	for _, n := range names {
		if m&n.m != 0 {
			out = append(out, n.s)
		}
	}
	if len(out) == 0 {
		return "other"
	}
	return strings.Join(out, "|")
}

func TestGuestInotifySeesHostChanges(t *testing.T) {
	_, host, guest := startWatched(t)
	os.ReadDir(guest) // the guest knows the directory
	wait := inotifyWatch(t, guest)
	os.WriteFile(filepath.Join(host, "c"), []byte("x"), 0644)
	wait(unix.IN_CREATE, "c")
	os.WriteFile(filepath.Join(host, "f"), []byte("appended"), 0644)
	wait(unix.IN_MODIFY, "f")
	os.Chmod(filepath.Join(host, "f"), 0600)
	wait(unix.IN_ATTRIB, "f")
	os.Rename(filepath.Join(host, "c"), filepath.Join(host, "d"))
	wait(unix.IN_MOVED_FROM, "c")
	wait(unix.IN_MOVED_TO, "d")
	os.Remove(filepath.Join(host, "d"))
	wait(unix.IN_DELETE, "d")
	os.Mkdir(filepath.Join(host, "newdir"), 0755)
	wait(unix.IN_CREATE|unix.IN_ISDIR, "newdir")
	if got, _ := os.ReadFile(filepath.Join(host, "f")); string(got) != "appended" {
		t.Errorf("host file is %q after the actuator ran, want it untouched", got)
	}
	if fi, _ := os.Stat(filepath.Join(host, "f")); fi.Mode().Perm() != 0600 {
		t.Errorf("host mode %v after the actuator ran, want 0600", fi.Mode())
	}
}

func TestOverflowLeavesGuestCorrect(t *testing.T) {
	env, host, guest := startWatched(t)
	os.ReadFile(filepath.Join(guest, "f"))
	os.ReadDir(guest)
	// A change the guest will not hear of but through the overflow.
	env.FS.Unregister(1)
	os.WriteFile(filepath.Join(host, "f"), []byte("changed while unwatched"), 0644)
	os.WriteFile(filepath.Join(host, "extra"), nil, 0644)
	env.FS.Register("w", consistency.Cached)
	env.FS.InjectEvents(&upstream.EventBatch{Seq: 1, Time: time.Now().UnixNano(),
		Events: []upstream.Event{{Kind: upstream.EvSubtree}}})
	if got, _ := os.ReadFile(filepath.Join(guest, "f")); string(got) != "changed while unwatched" {
		t.Errorf("after an overflow the guest reads %q", got)
	}
	if !listed(guest, "extra") {
		t.Error("after an overflow the guest does not list a host-created file")
	}
	if env.FS.Stats().Events.Overflows == 0 {
		t.Error("overflow not counted")
	}
}

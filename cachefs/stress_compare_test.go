package cachefs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDelegatedStressThenCompare: goroutines at once each change a
// directory of their own in a delegated subtree at random (creates,
// writes, appends, sparse writes, truncates, renames of files and
// directories, unlinks, mkdir, rmdir, symlinks, chmod, chown, utimes;
// hard links with CACHEFS_STRESS_HARDLINKS=1), then everything is
// written back, and CompareTrees finds no difference between the guest
// and the host. CACHEFS_STRESS_OPS sets the operations per goroutine
// (default 120), CACHEFS_EXERCISER_SEED the seed.
func TestDelegatedStressThenCompare(t *testing.T) {
	seed, ops := exerciserSeed(t), envInt(t, "CACHEFS_STRESS_OPS", 120)
	links := os.Getenv("CACHEFS_STRESS_HARDLINKS") == "1"
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	stressWriters(t, env.Mountpoint, seed, ops, links)
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Errorf("write-back: %+v", failed)
	}
	diffs, err := CompareTrees(env.Mountpoint, export)
	if err != nil {
		t.Fatalf("CompareTrees: %v", err)
	}
	strict := os.Getenv("CACHEFS_COMPARE_STRICT") == "1"
	known := 0
	for _, d := range diffs {
		if why := knownTreeDiff(d); why != "" && !strict {
			known++
			t.Logf("guest and host differ (known: %s): %s", why, d)
			continue
		}
		t.Errorf("guest and host differ: %s", d)
	}
	if known > 0 {
		t.Logf("%d known differences (issue 20), failures with CACHEFS_COMPARE_STRICT=1", known)
	}
}

// knownTreeDiffs are differences CompareTrees finds after write-back that
// are known bugs of issue 20 not fixed yet, by a substring of the
// difference, with the reason. They are logged, and fail the test with
// CACHEFS_COMPARE_STRICT=1.
var knownTreeDiffs = map[string]string{
	"(dir): mtime": "directory times are the host's, of the write-back, not the guest's",
}

func knownTreeDiff(d string) string {
	for k, why := range knownTreeDiffs {
		if strings.Contains(d, k) {
			return why
		}
	}
	return ""
}

// stressWriters runs four stressers at once, each for ops steps in a
// directory s<i> of its own under root, seeded from seed.
func stressWriters(t *testing.T, root string, seed uint64, ops int, links bool) {
	var wg sync.WaitGroup
	for i := range 4 {
		s := &stresser{rng: rand.New(rand.NewPCG(seed, uint64(i))), dir: filepath.Join(root, fmt.Sprintf("s%d", i)), links: links}
		if err := os.Mkdir(s.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ops {
				s.step()
			}
		}()
	}
	wg.Wait()
}

// stresser changes one directory at random. Errors are expected (a name
// picked may be gone or of the wrong type) and ignored: the comparison
// judges the outcome.
type stresser struct {
	rng   *rand.Rand
	dir   string
	links bool
	n     int
}

// name picks a path in the directory or one of its subdirectories.
func (s *stresser) name() string {
	sub := []string{"", "d0", "d1", "d0/e"}[s.rng.IntN(4)]
	return filepath.Join(s.dir, sub, fmt.Sprintf("n%d", s.rng.IntN(12)))
}

func (s *stresser) data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(s.rng.Uint32())
	}
	return b
}

func (s *stresser) write(p string, flag int, off int64, n int) {
	f, err := os.OpenFile(p, os.O_WRONLY|flag, 0o644)
	if err != nil {
		return
	}
	f.WriteAt(s.data(n), off)
	f.Close()
}

func (s *stresser) step() {
	p, q := s.name(), s.name()
	switch s.rng.IntN(15) {
	case 0, 1:
		s.write(p, os.O_CREATE|os.O_TRUNC, 0, s.rng.IntN(64<<10))
	case 2:
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			f.Write(s.data(s.rng.IntN(8 << 10)))
			f.Close()
		}
	case 3:
		s.write(p, os.O_CREATE, 1<<20+s.rng.Int64N(4<<20), 4096) // sparse
	case 4:
		os.Truncate(p, s.rng.Int64N(128<<10))
	case 5:
		os.Rename(p, q)
	case 6:
		os.Remove(p)
	case 7:
		os.Mkdir(filepath.Join(s.dir, []string{"d0", "d1", "d0/e"}[s.rng.IntN(3)]), 0o755)
	case 8:
		os.Mkdir(p, 0o750)
	case 9:
		os.Symlink(fmt.Sprintf("target-%d", s.rng.IntN(100)), p)
	case 10:
		os.Chmod(p, os.FileMode(0o600+s.rng.IntN(0o177)))
	case 11:
		os.Lchown(p, 1000+s.rng.IntN(3), 1000+s.rng.IntN(3))
	case 12:
		tm := time.Unix(1_600_000_000+s.rng.Int64N(1e8), s.rng.Int64N(1e9))
		ts := []unix.Timespec{unix.NsecToTimespec(tm.UnixNano()), unix.NsecToTimespec(tm.UnixNano())}
		unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
	case 13:
		if s.links {
			os.Link(p, q)
		} else {
			s.write(p, 0, s.rng.Int64N(64<<10), s.rng.IntN(16<<10))
		}
	case 14:
		os.Rename(filepath.Join(s.dir, "d1"), filepath.Join(s.dir, "d0", "moved"))
		os.Rename(filepath.Join(s.dir, "d0", "moved"), filepath.Join(s.dir, "d1"))
	}
}

// TestDelegatedTruncateMtimeWrittenBack: truncate(2) asks FUSE for no
// time change (the file system's size change sets it), and the guest
// sets the file's mtime; the host's copy must get that time, not the
// write-back's.
func TestDelegatedTruncateMtimeWrittenBack(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	p := filepath.Join(env.Mountpoint, "f")
	if err := os.WriteFile(p, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Unix(1_600_000_000, 0)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 10); err != nil {
		t.Fatal(err)
	}
	guest, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if guest.ModTime().Equal(old) {
		t.Fatalf("guest mtime %v after truncate, want it changed", guest.ModTime())
	}
	time.Sleep(20 * time.Millisecond) // the write-back's time would differ
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %+v", failed)
	}
	host, err := os.Stat(filepath.Join(export, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if !host.ModTime().Equal(guest.ModTime()) || host.Size() != 10 {
		t.Errorf("host: mtime %v size %d, want the guest's %v and 10", host.ModTime(), host.Size(), guest.ModTime())
	}
}

// TestDelegatedSymlinkMtimeWrittenBack: a symlink made in the guest has
// the guest's times on the host too, not the write-back's.
func TestDelegatedSymlinkMtimeWrittenBack(t *testing.T) {
	export := t.TempDir()
	env := startDelegated(t, export, t.TempDir())
	p := filepath.Join(env.Mountpoint, "l")
	if err := os.Symlink("target", p); err != nil {
		t.Fatal(err)
	}
	var guest, host unix.Stat_t
	if err := unix.Lstat(p, &guest); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the write-back's time would differ
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %+v", failed)
	}
	if err := unix.Lstat(filepath.Join(export, "l"), &host); err != nil {
		t.Fatal(err)
	}
	if host.Mtim != guest.Mtim {
		t.Errorf("host symlink mtime %v, want the guest's %v", time.Unix(host.Mtim.Unix()), time.Unix(guest.Mtim.Unix()))
	}
}

// TestDelegatedSparseFileKeepsHoles: a sparse file written in the guest
// keeps its holes on the host, and zeros written over a host file's data
// replace it there.
func TestDelegatedSparseFileKeepsHoles(t *testing.T) {
	export := t.TempDir()
	full := bytes.Repeat([]byte{0xff}, 1<<20)
	if err := os.WriteFile(filepath.Join(export, "old"), full, 0o644); err != nil {
		t.Fatal(err)
	}
	env := startDelegated(t, export, t.TempDir())
	f, err := os.Create(filepath.Join(env.Mountpoint, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("head"), 0)
	f.WriteAt([]byte("tail"), 64<<20)
	f.Close()
	g, err := os.OpenFile(filepath.Join(env.Mountpoint, "old"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.WriteAt(make([]byte, 64<<10), 4096)
	g.Close()
	if failed := env.FS.WriteBack(); len(failed) > 0 {
		t.Fatalf("write-back: %+v", failed)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(export, "sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 64<<20+4 || st.Blocks*512 > 1<<20 {
		t.Errorf("host copy of a sparse file: size %d, %d bytes allocated, want %d and under 1 MiB", st.Size, st.Blocks*512, 64<<20+4)
	}
	want := append(append(append([]byte{}, full[:4096]...), make([]byte, 64<<10)...), full[4096+64<<10:]...)
	diffs, err := CompareTrees(env.Mountpoint, export)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		if !strings.Contains(d, "(dir): mtime") { // known: TestDelegatedStressThenCompare
			t.Errorf("guest and host differ: %s", d)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(export, "old")); !bytes.Equal(got, want) {
		t.Errorf("host copy of old: first difference at %d", firstDiff(got, want))
	}
}

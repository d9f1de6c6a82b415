package cachefs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The exerciser's worker: one file, its model (the bytes it must hold),
// and the operations done to both. Every operation is checked against
// the model before the next (check).

// exMaxSize bounds the model's file: checks read it whole.
const exMaxSize = 512 << 10

// exWorker drives one file under dir through random operations.
type exWorker struct {
	rng   *rand.Rand
	dir   string // the worker's directory in the mount
	rel   string // the file's path under dir
	f     *os.File
	model []byte
	next  int      // names made so far
	log   []string // the operations done, newest last
	// skipped counts operations the file system refused as unsupported
	// (fallocate modes, O_DIRECT), by name.
	skipped map[string]int
}

// exOp is one kind of operation: it changes the file and the model
// alike, or returns an error.
type exOp struct {
	name string
	do   func(w *exWorker) error
}

var exOps = []exOp{
	{"write", (*exWorker).opWrite},
	{"pwrite-past-eof", (*exWorker).opWritePastEOF},
	{"ftruncate", (*exWorker).opFtruncate},
	{"truncate-path", (*exWorker).opTruncatePath},
	{"fallocate", (*exWorker).opFallocate},
	{"fallocate-keep-size", (*exWorker).opFallocateKeep},
	{"punch-hole", (*exWorker).opPunchHole},
	{"zero-range", (*exWorker).opZeroRange},
	{"mmap-write", (*exWorker).opMmapWrite},
	{"mmap-read", (*exWorker).opMmapRead},
	{"odirect-write", (*exWorker).opDirectWrite},
	{"odirect-read", (*exWorker).opDirectRead},
	{"rename-open", (*exWorker).opRename},
	{"reopen", (*exWorker).opReopen},
	{"fsync", (*exWorker).opFsync},
	{"fdatasync", (*exWorker).opFdatasync},
}

func newExWorker(seed uint64, id int, dir string) (*exWorker, error) {
	w := &exWorker{rng: rand.New(rand.NewPCG(seed, uint64(id))), dir: dir, skipped: map[string]int{}}
	for _, sub := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	w.rel = w.newName()
	f, err := os.OpenFile(filepath.Join(dir, w.rel), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	w.f = f
	return w, err
}

// newName picks a fresh name in the worker's directory or a subdirectory.
func (w *exWorker) newName() string {
	w.next++
	return filepath.Join([]string{"", "a", "b"}[w.rng.IntN(3)], fmt.Sprintf("f%d", w.next))
}

func (w *exWorker) path() string { return filepath.Join(w.dir, w.rel) }

func (w *exWorker) size() int64 { return int64(len(w.model)) }

// span picks an offset and length within [0, limit).
func (w *exWorker) span(limit int64, maxLen int) (int64, int) {
	if limit <= 0 {
		return 0, 0
	}
	off := w.rng.Int64N(limit)
	n := 1 + w.rng.IntN(maxLen)
	return off, int(min(int64(n), limit-off))
}

func (w *exWorker) randBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(w.rng.Uint32())
	}
	return b
}

// setSize grows (with zeros) or shrinks the model.
func (w *exWorker) setSize(n int64) {
	if n <= w.size() {
		w.model = w.model[:n]
		return
	}
	w.model = append(w.model, make([]byte, n-w.size())...)
}

// store writes b into the model at off, growing it as the file grows.
func (w *exWorker) store(off int64, b []byte) {
	if end := off + int64(len(b)); end > w.size() {
		w.setSize(end)
	}
	copy(w.model[off:], b)
}

// zero clears [off, off+n) of the model, clipped to its size.
func (w *exWorker) zero(off, n int64) {
	for i := off; i < min(off+n, w.size()); i++ {
		w.model[i] = 0
	}
}

func (w *exWorker) note(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf(format, args...))
}

func (w *exWorker) opWrite() error {
	off := w.rng.Int64N(w.size() + 1)
	n := min(1+w.rng.Int64N(64<<10), exMaxSize-off)
	if n <= 0 {
		return nil // full; truncates make room
	}
	b := w.randBytes(int(n))
	w.note("pwrite %d bytes at %d", n, off)
	if _, err := w.f.WriteAt(b, off); err != nil {
		return err
	}
	w.store(off, b)
	return nil
}

func (w *exWorker) opWritePastEOF() error {
	off := w.size() + 1 + w.rng.Int64N(128<<10)
	if off >= exMaxSize {
		return nil
	}
	b := w.randBytes(1 + w.rng.IntN(8<<10))
	w.note("pwrite %d bytes at %d past EOF %d", len(b), off, w.size())
	if _, err := w.f.WriteAt(b, off); err != nil {
		return err
	}
	w.store(off, b)
	return nil
}

// newSize picks a size to truncate to: down as often as up.
func (w *exWorker) newSize() int64 {
	if w.rng.IntN(2) == 0 || w.size() == 0 {
		return min(w.size()+w.rng.Int64N(exMaxSize/4), exMaxSize)
	}
	return w.rng.Int64N(w.size())
}

func (w *exWorker) opFtruncate() error {
	n := w.newSize()
	w.note("ftruncate %d -> %d", w.size(), n)
	if err := w.f.Truncate(n); err != nil {
		return err
	}
	w.setSize(n)
	return nil
}

func (w *exWorker) opTruncatePath() error {
	n := w.newSize()
	w.note("truncate by path %d -> %d", w.size(), n)
	if err := os.Truncate(w.path(), n); err != nil {
		return err
	}
	w.setSize(n)
	return nil
}

// fallocate runs fallocate(mode) on a random range that may reach past
// EOF, and applies it to the model with apply; a mode the mount does not
// support is counted and skipped.
func (w *exWorker) fallocate(name string, mode uint32, apply func(off, n int64)) error {
	off, n := w.span(min(w.size()+64<<10, exMaxSize), 128<<10)
	n = max(n, 1)
	w.note("fallocate %s [%d, +%d) size %d", name, off, n, w.size())
	err := unix.Fallocate(int(w.f.Fd()), mode, off, int64(n))
	if errors.Is(err, unix.EOPNOTSUPP) {
		w.skipped[name]++
		return nil
	}
	if err != nil {
		return err
	}
	apply(off, int64(n))
	return nil
}

func (w *exWorker) grow(off, n int64) {
	if off+n > w.size() {
		w.setSize(off + n)
	}
}

func (w *exWorker) opFallocate() error {
	return w.fallocate("fallocate", 0, w.grow)
}

func (w *exWorker) opFallocateKeep() error {
	return w.fallocate("fallocate-keep-size", unix.FALLOC_FL_KEEP_SIZE, func(int64, int64) {})
}

func (w *exWorker) opPunchHole() error {
	return w.fallocate("punch-hole", unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, w.zero)
}

func (w *exWorker) opZeroRange() error {
	if w.rng.IntN(2) == 0 {
		return w.fallocate("zero-range-keep-size", unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, w.zero)
	}
	return w.fallocate("zero-range", unix.FALLOC_FL_ZERO_RANGE, func(off, n int64) {
		w.zero(off, n)
		w.grow(off, n)
	})
}

// mmap maps the whole file shared, read-write; ok is false if the mount
// refuses shared mappings (counted).
func (w *exWorker) mmap(name string) ([]byte, bool, error) {
	if w.size() == 0 {
		return nil, false, nil
	}
	m, err := unix.Mmap(int(w.f.Fd()), 0, int(w.size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if errors.Is(err, unix.ENODEV) {
		w.skipped[name]++
		return nil, false, nil
	}
	return m, err == nil, err
}

// The mapping is touched only by the kernel, inside syscalls that copy
// between it and a memfd: a page fault in Go code on a FUSE file this
// process serves can deadlock it (the faulting thread never reaches a
// safe point, so a garbage collection stops every goroutine, the
// server's too, until the fault is answered).

func (w *exWorker) opMmapWrite() error {
	m, ok, err := w.mmap("mmap-write")
	if !ok {
		return err
	}
	defer unix.Munmap(m)
	off, n := w.span(w.size(), 32<<10)
	b := w.randBytes(n)
	w.note("mmap write %d bytes at %d, msync", n, off)
	if err := kernelCopy(m[off:off+int64(n)], b, true); err != nil {
		return err
	}
	w.store(off, b)
	return unix.Msync(m, unix.MS_SYNC)
}

func (w *exWorker) opMmapRead() error {
	m, ok, err := w.mmap("mmap-read")
	if !ok {
		return err
	}
	defer unix.Munmap(m)
	w.note("mmap read %d bytes", len(m))
	got := make([]byte, len(m))
	if err := kernelCopy(m, got, false); err != nil {
		return err
	}
	if i := firstDiff(got, w.model); i >= 0 {
		return fmt.Errorf("mapped byte %d is %#x, model %#x", i, got[i], w.model[i])
	}
	return nil
}

// kernelCopy copies b into mapping m (toMap) or m into b, through a
// memfd, so that the faults on m are taken in the kernel.
func kernelCopy(m, b []byte, toMap bool) error {
	fd, err := unix.MemfdCreate("exerciser", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	src, dst := m, b
	if toMap {
		src, dst = b, m
	}
	if n, err := unix.Pwrite(fd, src, 0); err != nil || n != len(src) {
		return fmt.Errorf("copy out of %d bytes: %d, %v", len(src), n, err)
	}
	if n, err := unix.Pread(fd, dst, 0); err != nil || n != len(dst) {
		return fmt.Errorf("copy in of %d bytes: %d, %v", len(dst), n, err)
	}
	return nil
}

// direct opens the file again with O_DIRECT and returns it with a
// page-aligned buffer of n bytes; ok is false if the mount refuses
// O_DIRECT (counted).
func (w *exWorker) direct(name string, n int) (*os.File, []byte, bool, error) {
	f, err := os.OpenFile(w.path(), os.O_RDWR|unix.O_DIRECT, 0)
	if errors.Is(err, unix.EINVAL) {
		w.skipped[name]++
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	buf, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		f.Close()
		return nil, nil, false, err
	}
	return f, buf, true, nil
}

func (w *exWorker) opDirectWrite() error {
	const blk = 4096
	n := blk * (1 + w.rng.IntN(8))
	off := blk * w.rng.Int64N(min(w.size()/blk+2, exMaxSize/blk-8))
	f, buf, ok, err := w.direct("odirect-write", n)
	if !ok {
		return err
	}
	defer unix.Munmap(buf)
	defer f.Close()
	copy(buf, w.randBytes(n))
	w.note("O_DIRECT write %d bytes at %d", n, off)
	if _, err := f.WriteAt(buf, off); err != nil {
		return err
	}
	w.store(off, buf)
	return nil
}

func (w *exWorker) opDirectRead() error {
	const blk = 4096
	n := blk * (1 + w.rng.IntN(8))
	off := blk * w.rng.Int64N(w.size()/blk+1)
	f, buf, ok, err := w.direct("odirect-read", n)
	if !ok {
		return err
	}
	defer unix.Munmap(buf)
	defer f.Close()
	w.note("O_DIRECT read %d bytes at %d", n, off)
	got, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return err
	}
	want := w.model[min(off, w.size()):min(off+int64(n), w.size())]
	if i := firstDiff(buf[:got], want); i >= 0 {
		return fmt.Errorf("O_DIRECT read of %d at %d: %d bytes, model %d; first difference at %d", n, off, got, len(want), off+int64(i))
	}
	return nil
}

func (w *exWorker) opRename() error {
	to := w.newName()
	w.note("rename open %s -> %s", w.rel, to)
	if err := os.Rename(w.path(), filepath.Join(w.dir, to)); err != nil {
		return err
	}
	w.rel = to
	return nil
}

func (w *exWorker) opReopen() error {
	w.note("close and reopen %s", w.rel)
	if err := w.f.Close(); err != nil {
		return err
	}
	f, err := os.OpenFile(w.path(), os.O_RDWR, 0)
	w.f = f
	return err
}

func (w *exWorker) opFsync() error {
	w.note("fsync")
	return w.f.Sync()
}

// opFdatasync: issue 20 saw fdatasync return EIO once per stress run.
func (w *exWorker) opFdatasync() error {
	w.note("fdatasync")
	return unix.Fdatasync(int(w.f.Fd()))
}

// check compares the file with the model: its size by descriptor and
// by path, and its bytes through the descriptor.
func (w *exWorker) check() error {
	fi, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("fstat: %v", err)
	}
	if fi.Size() != w.size() {
		return fmt.Errorf("fstat size %d, model %d", fi.Size(), w.size())
	}
	if fi, err = os.Stat(w.path()); err != nil || fi.Size() != w.size() {
		return fmt.Errorf("stat %s: size %v (%v), model %d", w.rel, sizeOf(fi), err, w.size())
	}
	return sameContents(w.f, w.model)
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// sameContents reads r whole, in pieces, and compares it with want.
func sameContents(r io.ReaderAt, want []byte) error {
	buf := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := r.ReadAt(buf, off)
		if i := firstDiff(buf[:n], want[min(off, int64(len(want))):min(off+int64(n), int64(len(want)))]); i >= 0 {
			return fmt.Errorf("byte %d differs: read %d bytes at %d, model size %d", off+int64(i), n, off, len(want))
		}
		off += int64(n)
		if err == io.EOF || n == 0 {
			if off != int64(len(want)) {
				return fmt.Errorf("read %d bytes, model %d", off, len(want))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read at %d: %v", off, err)
		}
	}
}

// firstDiff returns the first index where a and b differ (a length
// difference counts at the shorter's end), or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

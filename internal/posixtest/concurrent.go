package posixtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Concurrent use of one directory and one file.

// ConcurrentCreate creates and removes files from several goroutines in
// one directory: the listing holds exactly the survivors.
func ConcurrentCreate(t *testing.T, dir string) {
	const workers, each = 4, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				p := filepath.Join(dir, fmt.Sprintf("w%d-%03d", w, i))
				if err := os.WriteFile(p, []byte(p), 0644); err != nil {
					errs <- err
					return
				}
				if i%2 == 1 {
					if err := os.Remove(p); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker: %v", err)
	}
	names := listNames(t, dir)
	eq(t, "entries", len(names), workers*each/2)
	for w := 0; w < workers; w++ {
		for i := 0; i < each; i += 2 {
			p := filepath.Join(dir, fmt.Sprintf("w%d-%03d", w, i))
			eq(t, "listings of "+filepath.Base(p), names[filepath.Base(p)], 1)
			wantContent(t, p, p)
		}
	}
}

// ConcurrentWrites writes disjoint regions of one file through separate
// descriptors at once; every region reads back whole.
func ConcurrentWrites(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	const workers, region = 4, 256 << 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		f := open(t, p, os.O_CREATE|os.O_WRONLY, 0644)
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := bytes.Repeat([]byte{byte('a' + w)}, region)
			for off := 0; off < region; off += 4096 + w {
				end := min(off+4096+w, region)
				if _, err := f.WriteAt(data[off:end], int64(w*region+off)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("writer: %v", err)
	}
	got, err := os.ReadFile(p)
	check(t, err, "ReadFile")
	eq(t, "size", len(got), workers*region)
	for w := 0; w < workers; w++ {
		if !bytes.Equal(got[w*region:(w+1)*region], bytes.Repeat([]byte{byte('a' + w)}, region)) {
			t.Fatalf("region %d differs", w)
		}
	}
}

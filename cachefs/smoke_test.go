package cachefs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/internal/harness"
)

func TestSmokeFiles(t *testing.T) {
	export := t.TempDir()
	mnt := t.TempDir()
	harness.Start(t, harness.Options{Export: export, Mountpoint: mnt})
	if err := os.WriteFile(filepath.Join(mnt, "a"), []byte("hello"), 0644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(export, "a"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("host sees %q, %v; want hello", got, err)
	}
	if err := os.MkdirAll(filepath.Join(mnt, "d/e/f"), 0755); err != nil {
		t.Fatalf("MkdirAll: %v", err)
	}
	ents, err := os.ReadDir(filepath.Join(mnt))
	if err != nil || len(ents) != 2 {
		t.Fatalf("ReadDir: %v %v", ents, err)
	}
}

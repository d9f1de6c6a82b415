package cachefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachefs/cachefs/consistency"
	"github.com/cachefs/cachefs/internal/harness"
	"github.com/cachefs/cachefs/upstream"
	"golang.org/x/sys/unix"
)

// ls -l asks every file for security.selinux and system.posix_acl_access.
// In a cached subtree the host's listing says which files have no xattrs
// (AttrNoXattrs): those asks are answered without a round trip, while a
// file with an xattr still gets it from the host.
func TestCachedListingAnswersXattrs(t *testing.T) {
	export := t.TempDir()
	const files = 100
	for i := 0; i < files; i++ {
		if err := os.WriteFile(filepath.Join(export, fmt.Sprintf("f%03d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tagged := filepath.Join(export, "tagged")
	os.WriteFile(tagged, nil, 0o644)
	if err := unix.Setxattr(tagged, "user.tag", []byte("v"), 0); err != nil {
		t.Skipf("no user xattrs on the export's filesystem: %v", err)
	}
	env := harness.Start(t, harness.Options{Export: export, Policy: consistency.NewPolicy(consistency.Cached)})
	ents, err := os.ReadDir(env.Mountpoint)
	if err != nil || len(ents) != files+1 {
		t.Fatalf("ReadDir: %d entries, %v", len(ents), err)
	}
	xattrOps := func() uint64 {
		return env.Client.Stats.Requests(upstream.OpGetxattr) + env.Client.Stats.Requests(upstream.OpListxattr)
	}
	before := xattrOps()
	buf := make([]byte, 256)
	for _, e := range ents {
		p := filepath.Join(env.Mountpoint, e.Name())
		if _, err := os.Lstat(p); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"security.selinux", "system.posix_acl_access"} {
			if _, err := unix.Lgetxattr(p, name, buf); err != unix.ENODATA && err != unix.EOPNOTSUPP {
				t.Errorf("getxattr %s %s: %v, want ENODATA", e.Name(), name, err)
			}
		}
		n, err := unix.Llistxattr(p, buf)
		if e.Name() == "tagged" {
			if err != nil || string(buf[:n]) != "user.tag\x00" {
				t.Errorf("listxattr tagged: %q, %v", buf[:n], err)
			}
		} else if err != nil || n != 0 {
			t.Errorf("listxattr %s: %d bytes, %v; want none", e.Name(), n, err)
		}
	}
	if n, err := unix.Lgetxattr(filepath.Join(env.Mountpoint, "tagged"), "user.tag", buf); err != nil || string(buf[:n]) != "v" {
		t.Errorf("getxattr tagged user.tag: %q, %v", buf[:n], err)
	}
	sent := xattrOps() - before
	t.Logf("%d files: %d xattr requests upstream", files+1, sent)
	if sent > 4 {
		t.Errorf("xattr calls on %d listed files sent %d requests, want only the tagged file's", files+1, sent)
	}
}

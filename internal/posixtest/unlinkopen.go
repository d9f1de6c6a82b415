package posixtest

import (
	"os"
	"path/filepath"
	"testing"
)

// UnlinkOpenReadOnly removes, and replaces by rename, files that are
// open for reading but not read yet: their data stays readable through
// the open descriptor (a file system whose kernel opens without telling
// the daemon must keep the host's file until the kernel forgets it).
func UnlinkOpenReadOnly(t *testing.T, dir string) {
	p, q := filepath.Join(dir, "f"), filepath.Join(dir, "g")
	writeFile(t, p, "unlinked")
	writeFile(t, q, "replaced")
	f := open(t, p, os.O_RDONLY, 0)
	g := open(t, q, os.O_RDONLY, 0)
	check(t, os.Remove(p), "Unlink")
	writeFile(t, p+".new", "other")
	check(t, os.Rename(p+".new", q), "Rename over")
	eq(t, "nlink after unlink", fstat(t, f).Nlink, 0)
	wantFDContent(t, f, "unlinked")
	wantFDContent(t, g, "replaced")
	wantContent(t, q, "other")
}

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNoTestingInDaemon checks that the daemon links no test helper:
// neither package testing nor internal/harness is among the
// dependencies of cmd/cachefsd, for Linux or macOS. `cachefsd local`
// builds its pair through internal/inproc.
func TestNoTestingInDaemon(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	banned := map[string]bool{"testing": true, "github.com/cachefs/cachefs/internal/harness": true}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command(goBin, "list", "-deps", ".")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOOS=%s go list -deps: %v", goos, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("GOOS=%s go list -deps: no packages", goos)
		}
		for _, d := range deps {
			if banned[d] {
				t.Errorf("GOOS=%s: cmd/cachefsd depends on %s", goos, d)
			}
		}
	}
}

package posixtest

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// LockWaiters counts the lock requests blocked on the file at path, as
// /proc/locks lists them ("->"): the host's waits, for tests of what a
// guest's blocked or cancelled lock leaves there.
func LockWaiters(t *testing.T, path string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("Stat: %v", err)
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		fields := strings.Fields(sc.Text())
		if len(fields) > 6 && fields[1] == "->" && fields[6] == id {
			n++
		}
	}
	return n
}

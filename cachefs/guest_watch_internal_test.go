package cachefs

import (
	"strings"
	"testing"
)

// TestMountedInByDevice: a mount is found in the mount table by its id
// and device; the id alone, which the kernel hands to the next mount
// once ours is gone, is not ours.
func TestMountedInByDevice(t *testing.T) {
	table := "22 1 0:21 / /proc rw - proc proc rw\n" +
		"1234 22 0:77 / /tmp/other rw - fuse.cachefs cachefs rw\n"
	for _, c := range []struct {
		m    mountKey
		want bool
	}{
		{mountKey{id: 1234, dev: "0:77"}, true},
		{mountKey{id: 1234, dev: "0:76"}, false}, // our id, reused by another mount
		{mountKey{id: 123, dev: "0:77"}, false},
		{mountKey{id: 22, dev: "0:21"}, true},
	} {
		if got := mountedIn(strings.NewReader(table), c.m); got != c.want {
			t.Errorf("mountedIn(%+v) = %v, want %v", c.m, got, c.want)
		}
	}
}

package invalidation

import (
	"reflect"
	"testing"
)

// TestFSEventsMap checks the FSEvents flags → Changes mapping that the
// macOS watcher uses, here where it can run.
func TestFSEventsMap(t *testing.T) {
	roots := map[string]dirID{"/x": {1, 10}, "/x/sub": {1, 20}}
	dirs := map[string]dirID{"/x": {1, 10}, "/x/sub": {1, 20}, "/x/sub/d": {1, 30}}
	dirOf := func(p string) (dirID, bool) { d, ok := dirs[p]; return d, ok }
	for _, tc := range []struct {
		name string
		ev   fsEvent
		want []Change
	}{
		{"create+modify", fsEvent{"/x/f", fsItemCreated | fsItemModified, true}, []Change{
			{Op: Create, DirDev: 1, DirIno: 10, Name: "f", RootDev: 1, RootIno: 10},
			{Op: Modify, DirDev: 1, DirIno: 10, Name: "f", RootDev: 1, RootIno: 10}}},
		{"deepest root", fsEvent{"/x/sub/d/g", fsItemXattrMod | fsItemIsDir, true}, []Change{
			{Op: Attrib, DirDev: 1, DirIno: 30, Name: "g", IsDir: true, RootDev: 1, RootIno: 20}}},
		{"removed and back", fsEvent{"/x/f", fsItemRemoved | fsItemCreated, true}, []Change{
			{Op: Delete, DirDev: 1, DirIno: 10, Name: "f", RootDev: 1, RootIno: 10},
			{Op: Create, DirDev: 1, DirIno: 10, Name: "f", RootDev: 1, RootIno: 10}}},
		{"renamed away", fsEvent{"/x/f", fsItemRenamed, false}, []Change{
			{Op: MoveFrom, DirDev: 1, DirIno: 10, Name: "f", Cookie: 1, RootDev: 1, RootIno: 10}}},
		{"dropped", fsEvent{"/x/sub/d", fsMustScanSubDirs, true}, []Change{
			{Op: Overflow, RootDev: 1, RootIno: 20}}},
		{"outside", fsEvent{"/xy/f", fsItemCreated, true}, nil},
		{"root itself", fsEvent{"/x", fsItemInodeMetaMod, true}, nil},
		{"replay done", fsEvent{"/x/sub", fsHistoryDone, true}, nil},
		{"directory gone", fsEvent{"/x/gone/f", fsItemRemoved, false}, nil},
	} {
		var cookie uint32
		if got := fsChanges(tc.ev, roots, dirOf, &cookie); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

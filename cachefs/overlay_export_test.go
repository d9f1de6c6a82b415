package cachefs

import "time"

// HoldOverlays makes overlays registered from now on write back only
// at a flush.
func (fs *FS) HoldOverlays() { fs.ovl.gather = time.Hour }

// AbandonOverlays unmounts the overlays without writing them back, as a
// killed daemon leaves them (its fsyncs on the guest's disk).
func (fs *FS) AbandonOverlays() {
	fs.ovl.mu.Lock()
	regs := fs.ovl.byID
	fs.ovl.byID, fs.ovl.byPath = map[uint64]*ovlReg{}, map[string]*ovlReg{}
	fs.ovl.mu.Unlock()
	for _, r := range regs {
		r.ov.Abandon()
	}
}

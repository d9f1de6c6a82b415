package cachefs

import "github.com/cachefs/cachefs/upstream"

// InjectEvents applies a batch as if the host had sent it.
func (fs *FS) InjectEvents(b *upstream.EventBatch) { fs.onEvents(b) }

// HoldWriteback stops or restarts sending delegated changes to the host.
func (fs *FS) HoldWriteback(on bool) { fs.wb.hold(on) }

// Crash stops the write-back as a killed daemon would: nothing more is
// sent, the journal stays.
func (fs *FS) Crash() { fs.wb.close() }

package cachefs

import (
	"time"

	"github.com/cachefs/cachefs/upstream"
)

// InjectEvents applies a batch as if the host had sent it.
func (fs *FS) InjectEvents(b *upstream.EventBatch) { fs.set.onEvents(b) }

// HoldWriteback stops or restarts sending delegated changes to the host.
func (fs *FS) HoldWriteback(on bool) { fs.wb.hold(on) }

// Crash stops the write-back as a killed daemon would: nothing more is
// sent, the journal stays.
func (fs *FS) Crash() { fs.wb.close() }

// SetJournalCompact sets the journal length past which it is compacted
// while records wait, and returns the old one.
func SetJournalCompact(n int64) int64 { return journalCompact.Swap(n) }

// CompactJournal compacts the write-back journal now.
func (fs *FS) CompactJournal() error {
	fs.wb.mu.Lock()
	defer fs.wb.mu.Unlock()
	return fs.wb.compactJournalLocked()
}

// ReadyTarget is how many staging files are kept ready for creates.
const ReadyTarget = readyTarget

// SetJournalPiece sets how much of a new journal is written at a time,
// and returns the old size.
func SetJournalPiece(n int64) int64 { return journalPiece.Swap(n) }

// RewriteJournal writes the write-back journal anew, as after a failed
// append.
func (fs *FS) RewriteJournal() {
	fs.wb.mu.Lock()
	defer fs.wb.mu.Unlock()
	fs.wb.rewriteJournalLocked()
}

// SetJournalCrashHook sets the function called, with the write-back
// locked, at each point where a crash would leave a journal being
// written anew as it is; nil removes it.
func (fs *FS) SetJournalCrashHook(f func()) {
	fs.wb.mu.Lock()
	defer fs.wb.mu.Unlock()
	fs.wb.crashAt = f
}

// FillReady makes every staging file kept ready for creates, and waits
// for those being made.
func (fs *FS) FillReady() {
	for deadline := time.Now().Add(5 * time.Second); fs.Stats().Writeback.Ready < readyTarget && time.Now().Before(deadline); {
		if !fs.wb.readyOne() {
			time.Sleep(time.Millisecond) // another is making one
		}
	}
}

// StagedBytes returns the staged bytes the write-back limits count, and
// how many nodes have a staging copy.
func (fs *FS) StagedBytes() (int64, int) {
	fs.wb.mu.Lock()
	defer fs.wb.mu.Unlock()
	fs.nodes.mu.Lock()
	defer fs.nodes.mu.Unlock()
	files := 0
	for _, n := range fs.nodes.byID {
		if n.local != nil && n.local.staging != "" {
			files++
		}
	}
	return fs.wb.staged, files
}

// StagingFDMax bounds the daemon's cached descriptors of staging files.
const StagingFDMax = stagingFDMax

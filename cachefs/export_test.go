package cachefs

import "github.com/cachefs/cachefs/upstream"

// InjectEvents applies a batch as if the host had sent it.
func (fs *FS) InjectEvents(b *upstream.EventBatch) { fs.onEvents(b) }

package harness

import (
	"github.com/cachefs/cachefs/cachefs"
)

// KernelOps counts the FUSE requests the kernel sent a mount, by
// opcode, since the last Reset: tests prove that a request is answered
// in the kernel by its absence.
type KernelOps struct {
	fs   *cachefs.FS
	base map[string]uint64 // not safe for concurrent use
}

func (k *KernelOps) now() map[string]uint64 {
	m := map[string]uint64{}
	for _, o := range k.fs.Stats().Kernel {
		m[o.Op] = o.Count
	}
	return m
}

// Count returns how many requests of op (such as "FLUSH") were sent.
func (k *KernelOps) Count(op string) int { return int(k.now()[op] - k.base[op]) }

// Reset starts counting anew.
func (k *KernelOps) Reset() { k.base = k.now() }

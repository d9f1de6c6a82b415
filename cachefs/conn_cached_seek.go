package cachefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Lseek answers SEEK_DATA and SEEK_HOLE (the kernel answers the other
// whences alone). Most files have no holes, and programs ask: grep -r
// seeks a hole past what it has read of every file bigger than its
// buffer. The first such seek asks the host for the first hole from 0;
// if that is the end of the file, the file is marked dense beside its
// cached attributes, and this seek and later ones are answered from the
// size while those stay cached: any change of the file on the host or
// through the guest drops them, and the mark with them. A file with
// holes costs one more round trip a seek.
func (c *cachedConn) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if in.Whence != unix.SEEK_DATA && in.Whence != unix.SEEK_HOLE {
		return c.hostLseek(cancel, in, out)
	}
	ctx := callerCtx(cancel, &in.InHeader)
	epoch := c.up.Epoch()
	_, up, err := c.nodeUp(ctx, in.NodeId, epoch)
	if err != nil {
		return c.hostLseek(cancel, in, out)
	}
	size, ok := c.cache.denseSize(epoch, up)
	if !ok {
		gen := c.cache.fence(epoch)
		probe := *in
		probe.Offset, probe.Whence = 0, unix.SEEK_HOLE
		var hole fuse.LseekOut
		if c.hostLseek(cancel, &probe, &hole).Ok() {
			c.cache.noteDense(epoch, up, gen, hole.Offset)
		}
		size, ok = c.cache.denseSize(epoch, up)
	}
	if ok {
		return seekDense(in, size, out)
	}
	return c.hostLseek(cancel, in, out)
}

// seekDense answers a SEEK_DATA or SEEK_HOLE in a file of size without
// holes, as the host's file system would.
func seekDense(in *fuse.LseekIn, size uint64, out *fuse.LseekOut) fuse.Status {
	switch {
	case in.Offset >= size:
		return fuse.Status(syscall.ENXIO)
	case in.Whence == unix.SEEK_DATA:
		out.Offset = in.Offset
	default:
		out.Offset = size
	}
	return fuse.OK
}

package cachefs

import "github.com/hanwen/go-fuse/v2/fuse"

// noXattrConn is the cached connection without extended attributes
// (GuestOptions.NoCachedXattrs, `mount --cached-xattrs=false`): the
// first GETXATTR, LISTXATTR, SETXATTR and REMOVEXATTR are answered
// ENOSYS, and the kernel then answers every later one EOPNOTSUPP itself
// (fc->no_getxattr and its siblings), ACLs included: there are none.
//
// The kernel has no cache of xattrs, so with them `ls -l`, which asks
// for each file's ACL and security label, sends a GETXATTR per file
// however warm the caches are; without them a warm `ls -l` sends
// nothing (docs/connections.md, "Without xattrs").
type noXattrConn struct{ *cachedConn }

func (c noXattrConn) String() string { return "cachefs-cached-noxattr" }

func (noXattrConn) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	return 0, fuse.ENOSYS
}

func (noXattrConn) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	return 0, fuse.ENOSYS
}

func (noXattrConn) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	return fuse.ENOSYS
}

func (noXattrConn) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) fuse.Status {
	return fuse.ENOSYS
}

// MountCachedNoXattrs mounts fs as the cached mode's own connection at
// dir, without extended attributes.
func MountCachedNoXattrs(fs *FS, dir string, o MountOptions) (*fuse.Server, error) {
	opts := cachedMountOptions(o)
	opts.EnableAcl = false // no xattrs, so no ACLs for the kernel to cache
	return serve(noXattrConn{newCachedConn(fs)}, fs, dir, opts, o)
}

// Package hostfs is the host server's seam to the host's filesystem:
// what differs between the platforms the server runs on, one concern a
// file, with everything above it (package upstream) shared.
//
// # Concerns
//
//   - Node identity (identity*.go): how the server tells inodes apart
//     and reaches one again. Handles, on Linux where the export and the
//     process allow: a file handle (name_to_handle_at) per node, opened
//     again with open_by_handle_at. Portable, on every platform: no
//     handle; a node is its (dev, ino), reached again through its
//     parent directory's fd and its last name, checked against (dev,
//     ino). The portable identity is what macOS uses (it has no
//     unprivileged open by inode) and is selectable on Linux (Kind,
//     $CACHEFS_BACKEND, `cachefsd serve --backend portable`) so that
//     the test suites run against it here.
//   - Resolve (resolve_linux.go, reopen.go): a single component beneath
//     a directory fd, never following a symlink, as an O_PATH fd; an
//     open of the inode behind such an fd with real flags, through its
//     /proc/self/fd link (Linux) or, portable, through its parent and
//     name with the inode checked (ReopenAt), which the server uses for
//     files with the portable identity.
//   - Xattrs (xattr_linux.go): extended attributes of the inode behind a
//     node fd.
//   - Watch: package invalidation (hub_linux.go, fsevents_darwin.go).
//   - Errno map (errno*.go): host errno values as Linux's, the wire's.
//   - Case (case_*.go): whether the export folds case, which the
//     server reports to the guest (upstream.FeatCaseFold).
//
// # Platforms
//
// The server itself (package upstream's server files) builds on Linux
// only so far: on macOS its resolve and xattr halves are still to be
// written (no O_PATH or /proc/self/fd there: node fds opened with
// O_NOFOLLOW|O_SYMLINK or an *at call through the parent, xattr calls
// on fds with XATTR_NOFOLLOW), see docs/macos.md. Identity, errno and
// watch build for both.
package hostfs

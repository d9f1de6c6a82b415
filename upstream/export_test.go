//go:build linux

package upstream

import "github.com/cachefs/cachefs/upstream/hostfs"

// UsesHandles reports whether s identifies inodes by file handle.
func UsesHandles(s *Server) bool { return s.ident.Kind() == hostfs.Handles }

// RootRefs returns the references held on s's export root fd.
func RootRefs(s *Server) int32 { return s.rootRef.refs.Load() }

// SetidCalls returns the setxattr and removexattr calls s made on the
// xattr that keeps set-id bits.
func SetidCalls(s *Server) uint64 { return s.setidCalls.Load() }

// TakeLock is takeLock (lockwait.go).
var TakeLock = takeLock

// SetCaseFold makes s report a case-folding export, as a macOS volume
// would, where this machine has none to test on.
func SetCaseFold(s *Server, on bool) { s.caseFold = on }

// Package posixtest is cachefs's POSIX conformance suite: named tests,
// each a func(t, dir) that works only beneath dir, written once and run
// against a plain directory and against a cachefs mount in every
// consistency mode (cachefs/conformance_test.go).
//
// # Rules
//
// A test asserts what Linux does on a local filesystem; the plain
// directory run is the proof. Tests may run at once, each in a
// directory of its own, except those in ProcessWide. A test skips, with
// the reason, only where the filesystem under it or the caller's
// privilege lacks a feature (root for chown, fallocate modes).
//
// The model is go-fuse's posixtest package and rclone's vfstest.
package posixtest

import "testing"

// ProcessWide names the tests that change state of the whole process
// (the umask) or measure it: they may not run beside other tests.
// SparsePast2G measures the process's memory peak.
var ProcessWide = map[string]bool{"Umask": true, "SparsePast2G": true}

// All holds every test by name.
var All = map[string]func(t *testing.T, dir string){
	// file.go
	"FileBasic":          FileBasic,
	"OpenErrors":         OpenErrors,
	"OpenExcl":           OpenExcl,
	"OpenTrunc":          OpenTrunc,
	"AppendWrite":        AppendWrite,
	"Truncate":           Truncate,
	"Ftruncate":          Ftruncate,
	"PreadPwrite":        PreadPwrite,
	"SparseFile":         SparseFile,
	"UnlinkOpenFile":     UnlinkOpenFile,
	"UnlinkOpenReadOnly": UnlinkOpenReadOnly,
	"LargeFile":          LargeFile,
	"WriteUpdatesTimes":  WriteUpdatesTimes,
	"CopyFileRange":      CopyFileRange,
	// resize.go
	"OpenTruncAfterStat":  OpenTruncAfterStat,
	"TruncateThenPwrite":  TruncateThenPwrite,
	"TruncateThenAppend":  TruncateThenAppend,
	"TruncateShrinkStays": TruncateShrinkStays,
	"RenameOpenThenWrite": RenameOpenThenWrite,
	"SparsePast2G":        SparsePast2G,
	// dir.go
	"MkdirRmdir":    MkdirRmdir,
	"ReaddirBig":    ReaddirBig,
	"ReaddirTypes":  ReaddirTypes,
	"ReaddirModify": ReaddirModify,
	"ReaddirSeek":   ReaddirSeek,
	"DeepPath":      DeepPath,
	"OddNames":      OddNames,
	"NameTooLong":   NameTooLong,
	// link.go
	"Symlink":         Symlink,
	"SymlinkDangling": SymlinkDangling,
	"SymlinkLong":     SymlinkLong,
	"HardLink":        HardLink,
	// rename.go
	"RenameFile":          RenameFile,
	"RenameOverFile":      RenameOverFile,
	"RenameDir":           RenameDir,
	"RenameOtherDir":      RenameOtherDir,
	"RenameNoreplace":     RenameNoreplace,
	"RenameExchange":      RenameExchange,
	"RenameOverLinkCtime": RenameOverLinkCtime,
	// attr.go
	"Chmod":          Chmod,
	"ChmodZero":      ChmodZero,
	"Chown":          Chown,
	"Utimens":        Utimens,
	"UtimesPreEpoch": UtimesPreEpoch,
	"Umask":          Umask,
	"SetgidDir":      SetgidDir,
	"Statfs":         Statfs,
	"Mknod":          Mknod,
	"MknodDevice":    MknodDevice,
	// xattr.go
	"Xattr":       Xattr,
	"XattrErrors": XattrErrors,
	// alloc.go
	"Fallocate":    Fallocate,
	"PunchHole":    PunchHole,
	"SeekDataHole": SeekDataHole,
	"Fsync":        Fsync,
	// lock.go
	"OFDLock":          OFDLock,
	"GetLk":            GetLk,
	"GetLkToEOF":       GetLkToEOF,
	"ProcessLock":      ProcessLock,
	"ProcessLockClose": ProcessLockClose,
	"Flock":            Flock,
	// visible.go
	"CreateAfterMiss":       CreateAfterMiss,
	"RemoveThenMiss":        RemoveThenMiss,
	"AttrsFollowChanges":    AttrsFollowChanges,
	"DirTimes":              DirTimes,
	"DirTimesLinkMknod":     DirTimesLinkMknod,
	"RmdirOpenDir":          RmdirOpenDir,
	"RecreateDifferentType": RecreateDifferentType,
	// concurrent.go
	"ConcurrentCreate": ConcurrentCreate,
	"ConcurrentWrites": ConcurrentWrites,
	// setid.go
	"WriteKillsSetid": WriteKillsSetid,
	// odirect.go
	"ODirect":               ODirect,
	"ODirectBesideBuffered": ODirectBesideBuffered,
	// mmap.go
	"MmapRead":  MmapRead,
	"MmapWrite": MmapWrite,
}

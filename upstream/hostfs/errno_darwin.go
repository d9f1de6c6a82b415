package hostfs

import "syscall"

// ToLinux returns the macOS errno e as Linux numbers it.
func ToLinux(e syscall.Errno) syscall.Errno { return mapErrno(darwinToLinux, e) }

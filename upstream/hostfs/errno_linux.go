package hostfs

import "syscall"

// ToLinux returns e as the wire numbers it: on Linux, e.
func ToLinux(e syscall.Errno) syscall.Errno { return e }

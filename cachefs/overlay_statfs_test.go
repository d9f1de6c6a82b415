package cachefs_test

import "golang.org/x/sys/unix"

type unixStatfs = unix.Statfs_t

const overlayMagic = unix.OVERLAYFS_SUPER_MAGIC

func statfs(p string, st *unix.Statfs_t) error { return unix.Statfs(p, st) }

package hostfs

import "golang.org/x/sys/unix"

// pcCaseSensitive is _PC_CASE_SENSITIVE (sys/unistd.h).
const pcCaseSensitive = 11

// CaseFold reports whether the volume of dirfd is case-insensitive (APFS
// and HFS+ by default): pathconf says 0 for case-sensitive no. A volume
// that cannot tell is taken as case-sensitive.
func CaseFold(dirfd int) bool {
	v, err := unix.Fpathconf(dirfd, pcCaseSensitive)
	return err == nil && v == 0
}

package upstream

import "syscall"

// WBStalls reports whether an apply op that failed with e failed for
// lack of a resource the host may have again later: space (ENOSPC,
// EDQUOT), descriptors (EMFILE, ENFILE) or memory (ENOMEM). The server
// applies none of the request's later ops (ECANCELED), and the guest
// keeps the op and sends it again, in order, rather than drop it.
func WBStalls(e syscall.Errno) bool {
	switch e {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM:
		return true
	}
	return false
}

package hostfs

import (
	"syscall"
	"testing"
)

// TestDarwinErrnos checks the macOS → Linux errno map, here where it
// can run (values from macOS's sys/errno.h).
func TestDarwinErrnos(t *testing.T) {
	for _, c := range []struct {
		name   string
		darwin syscall.Errno
		want   syscall.Errno
	}{
		{"EPERM", 1, syscall.EPERM},
		{"ENOENT", 2, syscall.ENOENT},
		{"EDEADLK", 11, syscall.EDEADLK},
		{"EAGAIN", 35, syscall.EAGAIN},
		{"ENOTSUP", 45, syscall.EOPNOTSUPP},
		{"ELOOP", 62, syscall.ELOOP},
		{"ENAMETOOLONG", 63, syscall.ENAMETOOLONG},
		{"ENOTEMPTY", 66, syscall.ENOTEMPTY},
		{"ESTALE", 70, syscall.ESTALE},
		{"ENOSYS", 78, syscall.ENOSYS},
		{"ENOATTR", 93, syscall.ENODATA},
		{"EOPNOTSUPP", 102, syscall.EOPNOTSUPP},
		{"EBADRPC", 72, syscall.EIO},
	} {
		if got := mapErrno(darwinToLinux, c.darwin); got != c.want {
			t.Errorf("%s (%d): got %d (%v), want %d (%v)", c.name, c.darwin, got, got, c.want, c.want)
		}
	}
}

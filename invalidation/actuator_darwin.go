package invalidation

// gettid is 0 on macOS: the actuator serves a guest's FUSE mount, and
// guests run on Linux only.
func gettid() int { return 0 }

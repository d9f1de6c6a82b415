package fuseuring

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The kernel makes a queue per possible CPU (num_possible_cpus, which on
// a VM can exceed the CPUs online) and serves no request until each has
// an entry; a request goes to the queue of the CPU its caller runs on.

// possibleCPUs returns how many CPUs the kernel counts as possible.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, fmt.Errorf("the CPUs for the ring queues: %w", err)
	}
	n, err := countCPUs(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("the CPUs for the ring queues: /sys/devices/system/cpu/possible: %w", err)
	}
	return n, nil
}

// countCPUs counts the CPUs of a kernel CPU list such as "0-3,5".
func countCPUs(list string) (int, error) {
	n := 0
	for _, r := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, err
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("bad range %q", r)
			}
		}
		n += b - a + 1
	}
	return n, nil
}

// allowedCPUs returns the CPUs the daemon may run on; nil if unknown.
func allowedCPUs() map[int]bool {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	out := map[int]bool{}
	for cpu := 0; cpu < len(set)*64; cpu++ {
		if set.IsSet(cpu) {
			out[cpu] = true
		}
	}
	return out
}

// pin keeps the calling thread on cpu.
func pin(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}

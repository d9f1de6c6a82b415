package fuseuring

import "testing"

func TestCountCPUs(t *testing.T) {
	for list, want := range map[string]int{"0": 1, "0-1": 2, "0-3,5": 5, "0,2-3,8-15": 11} {
		if n, err := countCPUs(list); n != want || err != nil {
			t.Errorf("countCPUs(%q) = %d, %v; want %d", list, n, err, want)
		}
	}
	for _, list := range []string{"", "a", "3-1", "0-"} {
		if n, err := countCPUs(list); err == nil {
			t.Errorf("countCPUs(%q) = %d, want an error", list, n)
		}
	}
}

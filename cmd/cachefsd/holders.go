package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxHolders bounds how many holders a busy unmount lists.
const maxHolders = 20

// holders lists the processes that keep mnt busy, one line each: those
// with a working directory, root, open file or mapped file under it.
// It reads only /proc, never the mount itself.
func holders(mnt string) []string {
	pids, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, dir := range pids {
		pid, _ := strconv.Atoi(filepath.Base(dir))
		if pid == os.Getpid() {
			continue
		}
		if what := holds(dir, mnt); len(what) > 0 {
			comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
			out = append(out, fmt.Sprintf("pid %d (%s): %s", pid, strings.TrimSpace(string(comm)), strings.Join(what, ", ")))
			if len(out) == maxHolders {
				break
			}
		}
	}
	return out
}

// holds returns what the process of /proc directory dir holds under
// mnt, as "cwd PATH", "root PATH", "fd N PATH" or "maps PATH".
func holds(dir, mnt string) []string {
	var what []string
	for _, l := range []string{"cwd", "root"} {
		if p, err := os.Readlink(filepath.Join(dir, l)); err == nil && under(p, mnt) {
			what = append(what, l+" "+p)
		}
	}
	fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
	for _, fd := range fds {
		if p, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && under(p, mnt) {
			what = append(what, "fd "+fd.Name()+" "+p)
		}
	}
	return append(what, mapped(filepath.Join(dir, "maps"), mnt)...)
}

// mapped returns the files under mnt that a maps file lists, once each.
func mapped(maps, mnt string) []string {
	f, err := os.Open(maps)
	if err != nil {
		return nil
	}
	defer f.Close()
	var what []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		i := strings.IndexByte(line, '/') // the path, after fields without one
		if i >= 0 && under(line[i:], mnt) && !seen[line[i:]] {
			seen[line[i:]] = true
			what = append(what, "maps "+line[i:])
		}
	}
	return what
}

// under reports whether path p is mnt or lies below it.
func under(p, mnt string) bool {
	return p == mnt || strings.HasPrefix(p, mnt+"/")
}

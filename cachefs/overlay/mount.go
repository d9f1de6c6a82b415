package overlay

import (
	"bufio"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Layers name an overlay's directories.
type Layers struct {
	Lower  string // read-only: a cached view of the subtree
	Upper  string // the guest's changes, on the guest's disk
	Work   string // overlayfs's work directory, on Upper's filesystem
	Target string // where the overlay is mounted; may be Lower itself
}

// mountOptions are the overlay's features, chosen for POSIX behaviour
// and a cheap write-back (docs/overlay.md says why):
//
//   - redirect_dir=on: a lower directory renames in place, marked with
//     its lower path, instead of failing with EXDEV;
//   - metacopy=on: a chmod, chown, utimes or rename of a lower file
//     copies up its metadata only; its data stays the lower's, so its
//     write-back is an attribute change or a rename;
//   - index=on: a copied-up file keeps its hard links (the kernel falls
//     back to index=off, with a warning, if the lower layer cannot
//     decode file handles);
//   - xino=auto: inode numbers are unique across the layers.
const mountOptions = "redirect_dir=on,metacopy=on,index=on,xino=auto"

// Mount mounts an overlay of l. An overlay may be mounted over its own
// lower directory: overlayfs holds the lower path it resolved.
func Mount(l Layers) error {
	if err := mountNew(l); err != unix.ENOSYS && err != unix.EINVAL {
		return err
	}
	return unix.Mount("overlay", l.Target, "overlay", 0, "lowerdir="+escape(l.Lower)+
		",upperdir="+escape(l.Upper)+",workdir="+escape(l.Work)+","+mountOptions)
}

// mountNew mounts through the new mount API, which takes each layer as
// it is (no escaping of ',' and ':').
func mountNew(l Layers) error {
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	set := func(k, v string) {
		if err == nil {
			err = unix.FsconfigSetString(fd, k, v)
		}
	}
	set("lowerdir+", l.Lower)
	set("upperdir", l.Upper)
	set("workdir", l.Work)
	for _, o := range strings.Split(mountOptions, ",") {
		k, v, _ := strings.Cut(o, "=")
		set(k, v)
	}
	if err != nil {
		return err
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return err
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(mfd)
	return unix.MoveMount(mfd, "", unix.AT_FDCWD, l.Target, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// escape escapes the characters the legacy mount options separate on.
func escape(p string) string {
	return strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`).Replace(p)
}

// Unmount unmounts the overlay at target, retrying while it is busy for
// a moment; then it detaches it (the files left open keep it alive) and
// reports detached.
func Unmount(target string) (detached bool, err error) {
	for i := 0; i < 20; i++ {
		if err = unix.Unmount(target, 0); err != unix.EBUSY {
			return false, err
		}
		time.Sleep(25 * time.Millisecond)
	}
	return true, unix.Unmount(target, unix.MNT_DETACH)
}

// unmountStale detaches overlays left mounted on upper by a daemon that
// died: with their lower gone they serve nobody, and the upper
// directory may not change under a mounted overlay while it is written
// back.
func unmountStale(upper string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := indexOf(fields, "-")
		if sep < 0 || sep+3 >= len(fields) || fields[sep+1] != "overlay" {
			continue
		}
		for _, o := range strings.Split(fields[sep+3], ",") {
			if o == "upperdir="+upper {
				unix.Unmount(unescapeMountinfo(fields[4]), unix.MNT_DETACH)
			}
		}
	}
}

func indexOf(fields []string, s string) int {
	for i, f := range fields {
		if f == s {
			return i
		}
	}
	return -1
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, ok := octal(s[i+1 : i+4]); ok {
				b.WriteByte(n)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) (byte, bool) {
	var n int
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		n = n*8 + int(c-'0')
	}
	return byte(n), n < 256
}

package overlay

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	if err := create(fd, l); err != nil {
		return err
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(mfd)
	return unix.MoveMount(mfd, "", unix.AT_FDCWD, l.Target, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// create configures the overlay context fd with l and the mount
// options and makes its superblock.
func create(fd int, l Layers) error {
	var err error
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
	return unix.FsconfigCreate(fd)
}

// Probe reports why no overlay can be mounted with its upper and work
// directories in dir (made, then removed with what the probe left), or
// nil. It makes an overlay's superblock with the mount options over a
// lower directory in dir, through the new mount API, and attaches it
// nowhere. Nil too on a kernel without that API (before 5.2): the first
// mount tells there.
func Probe(dir string) error {
	os.RemoveAll(dir) // a probe's a killed daemon left
	defer os.RemoveAll(dir)
	l := Layers{Lower: filepath.Join(dir, "lower"), Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work")}
	for _, d := range []string{l.Lower, l.Upper, l.Work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	switch err {
	case nil:
	case unix.ENOSYS:
		return nil
	case unix.EPERM:
		return errors.New("mounting an overlay needs CAP_SYS_ADMIN (root)")
	case unix.ENODEV:
		return errors.New("the kernel has no overlayfs")
	default:
		return fmt.Errorf("fsopen overlay: %w", err)
	}
	defer unix.Close(fd)
	if err := create(fd, l); err != nil {
		return fmt.Errorf("an overlay with its upper directory in %s: %w%s", dir, err, contextLog(fd))
	}
	return nil
}

// contextLog returns the messages the kernel left in the mount context
// fd, such as why it refused a layer, after ": ".
func contextLog(fd int) string {
	var msgs []string
	buf := make([]byte, 1024)
	for len(msgs) < 8 {
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		m := string(buf[:n])
		if len(m) > 2 && m[1] == ' ' { // "e ", "w ", "i ": the message's level
			m = m[2:]
		}
		msgs = append(msgs, strings.TrimSpace(m))
	}
	if len(msgs) == 0 {
		return ""
	}
	return " (" + strings.Join(msgs, "; ") + ")"
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

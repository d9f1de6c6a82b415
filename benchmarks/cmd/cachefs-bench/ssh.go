package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"time"
)

// prepareSSH starts a private sshd on a free port of 127.0.0.1 that
// accepts a key generated here, checks that ssh logs in with it, and
// returns sshfs's arguments. The sshd (and the sftp-server it forks per
// mount) counts as part of the sshfs daemon.
func prepareSSH(r *runner, s *system) ([]string, error) {
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if sshd, err = exec.LookPath("/usr/sbin/sshd"); err != nil {
			return nil, fmt.Errorf("sshd not found (apt-get install openssh-server)")
		}
	}
	dir := filepath.Join(r.cfg.Work, "ssh")
	os.MkdirAll(dir, 0o700)
	os.MkdirAll("/run/sshd", 0o755)
	for _, k := range []string{"host_ed25519", "id_ed25519"} {
		if err := sshKeygen(filepath.Join(dir, k)); err != nil {
			return nil, err
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "id_ed25519.pub"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := writeSSHDConfig(dir, port); err != nil {
		return nil, err
	}
	m := &mount{exited: make(chan struct{}), log: filepath.Join(r.cfg.Work, "logs", "sshd.log")}
	if err := r.startDaemon(m, sshd, []string{"-D", "-e", "-f", filepath.Join(dir, "sshd_config")}); err != nil {
		return nil, err
	}
	u, _ := user.Current()
	ssh := []string{"-i", filepath.Join(dir, "id_ed25519"), "-p", strconv.Itoa(port),
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
		"-o", "LogLevel=ERROR"}
	if err := waitSSH(m, append(ssh, u.Username+"@127.0.0.1", "true")); err != nil {
		r.unmount(m)
		return nil, fmt.Errorf("sshd on 127.0.0.1:%d: %v (log %s: %s)", port, err, m.log, tail(m.log))
	}
	r.sshd = m
	s.roots = []int{m.cmd.Process.Pid}
	return []string{"-f", "-o", "IdentityFile=" + filepath.Join(dir, "id_ed25519"),
		"-o", "port=" + strconv.Itoa(port), "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
		u.Username + "@127.0.0.1:{export}", "{mnt}"}, nil
}

func sshKeygen(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ssh-keygen: %v: %s", err, out)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func writeSSHDConfig(dir string, port int) error {
	sftp := "/usr/lib/openssh/sftp-server"
	if _, err := os.Stat(sftp); err != nil {
		sftp = "internal-sftp"
	}
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s/host_ed25519
PidFile %s/sshd.pid
AuthorizedKeysFile %s/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp %s
LogLevel ERROR
`, port, dir, dir, dir, sftp)
	return os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(conf), 0o600)
}

// waitSSH retries a trial login while sshd starts.
func waitSSH(m *mount, args []string) error {
	var err error
	var out []byte
	for i := 0; i < 50; i++ {
		select {
		case <-m.exited:
			return fmt.Errorf("sshd exited")
		default:
		}
		if out, err = exec.Command("ssh", args...).CombinedOutput(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("ssh login: %v: %s", err, out)
}

// Package localsvc starts private redis-server and PostgreSQL instances from
// the binaries installed on this machine: loopback only, free ports, data in a
// folder of the caller's choosing, and no process left behind once the caller
// stops them (or dies: the children get SIGKILL with their parent).
//
// It is what `make run`, `make test` and the test helpers stand on, so that a
// fresh Debian machine with Go needs nothing started by hand.
package localsvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrMissing reports a server binary that is not installed and could not be.
var ErrMissing = errors.New("localsvc: server binary missing")

// Listens reports whether process pid holds a socket listening on addr's
// TCP port (127.0.0.1:port, or all addresses): a port FreePort gave out may
// be taken by another process before the one it was meant for binds it
// (another test's server, another stack's service), and a readiness check
// answered there says nothing of ours.
func Listens(pid int, addr string) bool {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return false
	}
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false
	}
	loopback, wildcard := fmt.Sprintf("0100007F:%04X", port), fmt.Sprintf("00000000:%04X", port)
	var inodes []string
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) >= 10 && (f[1] == loopback || f[1] == wildcard) && f[3] == "0A" {
			inodes = append(inodes, "socket:["+f[9]+"]")
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && slices.Contains(inodes, link) {
			return true
		}
	}
	return false
}

// FreePort asks the kernel for a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var installMu sync.Mutex

// Ensure finds the named binary (PATH or extra dirs), installing the Debian
// package when it is missing and we are root with apt-get. Otherwise it
// returns an error that says exactly what to install.
func Ensure(binary, debPackage string, dirs ...string) (string, error) {
	var p string
	err := ensure(binary+" not found", func() bool { p = lookPath(binary, dirs); return p != "" }, debPackage)
	return p, err
}

// ensure makes ok hold: when it does not, it installs debPackages if we are
// root with apt-get, and asks ok again. Otherwise, or if that did not
// help, the error (ErrMissing) says what is missing and what to install.
func ensure(missing string, ok func() bool, debPackages ...string) error {
	if ok() {
		return nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	if ok() {
		return nil
	}
	hint := fmt.Errorf("%w: %s; install it with: sudo apt-get update && sudo apt-get install -y %s", ErrMissing, missing, strings.Join(debPackages, " "))
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return hint
	}
	fmt.Fprintf(os.Stderr, "localsvc: %s, installing Debian packages %v\n", missing, debPackages)
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	install := append([]string{"-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends"}, debPackages...)
	for _, args := range [][]string{{"update"}, install} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%w (apt-get %s: %v)", hint, strings.Join(args, " "), err)
		}
	}
	if !ok() {
		return hint
	}
	return nil
}

// EnsurePython finds Debian's python3 (/usr/bin/python3, whatever else is
// first on PATH) with module importable, installing python3 and
// debPackage when they are missing and it can.
func EnsurePython(module, debPackage string) (string, error) {
	const python = "/usr/bin/python3"
	err := ensure("python3 cannot import "+module, func() bool {
		return exec.Command(python, "-c", "import "+module).Run() == nil
	}, "python3", debPackage)
	return python, err
}

func lookPath(binary string, dirs []string) string {
	if p, err := exec.LookPath(binary); err == nil {
		return p
	}
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, binary))
		if len(matches) > 0 {
			return matches[len(matches)-1]
		}
	}
	return ""
}

// proc is one child server process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProc(cmd *exec.Cmd, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Die with us, and be a process group of our own so that Stop reaches
	// every child (PostgreSQL forks backends).
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends sig to the process group and waits up to d before SIGKILL.
func (p *proc) stop(sig syscall.Signal, d time.Duration) {
	if p == nil || !p.running() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, sig)
	select {
	case <-p.done:
	case <-time.After(d):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Backends forked by PostgreSQL are in the same group: make sure none stays.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

func waitFor(ctx context.Context, p *proc, logPath string, ready func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ready() {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("exited early (%v); log %s:\n%s", p.err, logPath, tail(logPath))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready after 30s; log %s:\n%s", logPath, tail(logPath))
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// runAs makes cmd run as the named user when we are root (PostgreSQL refuses
// to run as root) and returns that user's uid and gid.
func runAs(cmd *exec.Cmd, name string) (uid, gid int, err error) {
	uid, gid = os.Getuid(), os.Getgid()
	if os.Geteuid() != 0 {
		return uid, gid, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("running as root needs the %q user (it comes with the postgresql package): %w", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return uid, gid, nil
}

func chownTree(dir string, uid, gid int) error {
	if os.Geteuid() != 0 {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

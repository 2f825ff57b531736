package localsvc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pgDirs are where Debian puts the PostgreSQL server binaries (not on PATH).
var pgDirs = []string{"/usr/lib/postgresql/*/bin"}

// PostgresOptions shapes a private PostgreSQL.
type PostgresOptions struct {
	Dir  string // cluster folder; initdb runs when it holds no cluster yet
	Port int    // 0 = a free one
	// Fast trades durability for speed (fsync off): tests only.
	Fast bool
}

// Postgres is a running private PostgreSQL server with trust auth for the
// postgres user on 127.0.0.1.
type Postgres struct {
	Port int
	opts PostgresOptions
	bin  string
	p    *proc
	uid  int
	gid  int
}

// StartPostgres runs initdb if needed, starts postgres and waits until it
// accepts connections.
func StartPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	initdb, err := Ensure("initdb", "postgresql", pgDirs...)
	if err != nil {
		return nil, err
	}
	bin, err := Ensure("postgres", "postgresql", pgDirs...)
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("localsvc: PostgresOptions.Dir is required")
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	autoPort := opts.Port == 0
	if autoPort {
		if opts.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	pg := &Postgres{opts: opts, bin: bin, Port: opts.Port}
	data := filepath.Join(opts.Dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		if err := os.MkdirAll(data, 0o700); err != nil {
			return nil, err
		}
		cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
		probe := exec.Command("true")
		uid, gid, err := runAs(probe, "postgres")
		if err != nil {
			return nil, err
		}
		pg.uid, pg.gid = uid, gid
		cmd.SysProcAttr = probe.SysProcAttr
		if err := chownTree(opts.Dir, uid, gid); err != nil {
			return nil, err
		}
		// The postgres user must be able to reach the folder.
		for d := filepath.Dir(opts.Dir); d != "/" && os.Geteuid() == 0; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				_ = os.Chmod(d, fi.Mode().Perm()|0o011)
			}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("localsvc: initdb: %v\n%s", err, out)
		}
	} else {
		probe := exec.Command("true")
		pg.uid, pg.gid, _ = runAs(probe, "postgres")
	}
	// A free port can be taken between our check and the server's bind:
	// try a few.
	for attempt := 0; ; attempt++ {
		err = pg.start(ctx)
		if err == nil || !autoPort || attempt == 5 || !strings.Contains(err.Error(), "already in use") {
			return pg, err
		}
		if pg.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
}

func (pg *Postgres) start(ctx context.Context) error { return pg.startAs(ctx, false) }

// standbySignal is the file that starts a server as a standby.
const standbySignal = "standby.signal"

// startAs starts the server; inRecovery starts it as a standby that has no
// primary to follow and refuses connections (see StartInRecovery).
func (pg *Postgres) startAs(ctx context.Context, inRecovery bool) error {
	data := filepath.Join(pg.opts.Dir, "data")
	addr := "127.0.0.1:" + strconv.Itoa(pg.Port)
	signal := filepath.Join(data, standbySignal)
	if inRecovery {
		if err := os.WriteFile(signal, nil, 0o600); err != nil {
			return err
		}
	} else if err := os.Remove(signal); err != nil && !os.IsNotExist(err) {
		return err
	}
	args := []string{
		"-D", data, "-p", strconv.Itoa(pg.Port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + pg.opts.Dir,
		"-c", "max_connections=500",
		"-c", "shared_buffers=256MB",
		"-c", "log_min_messages=warning",
	}
	if pg.opts.Fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	ready := func() bool { return pgAnswer(addr) == "" }
	if inRecovery {
		args = append(args, "-c", "hot_standby=off")
		ready = func() bool { return pgAnswer(addr) == "57P03" }
	}
	cmd := exec.Command(pg.bin, args...)
	if _, _, err := runAs(cmd, "postgres"); err != nil {
		return err
	}
	logPath := filepath.Join(pg.opts.Dir, "postgres.log")
	if err := chownTree(pg.opts.Dir, pg.uid, pg.gid); err != nil {
		return err
	}
	p, err := startProc(cmd, logPath)
	if err != nil {
		return fmt.Errorf("localsvc: start postgres: %w", err)
	}
	pg.p = p
	if err := waitFor(ctx, p, logPath, ready); err != nil {
		p.stop(syscall.SIGKILL, 0)
		return fmt.Errorf("localsvc: postgres on %s: %w", addr, err)
	}
	return nil
}

// URL is the connection URL of database db on this server.
func (pg *Postgres) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.Port, db)
}

// Stop shuts the server down (fast shutdown, SIGKILL after 10s).
func (pg *Postgres) Stop() { pg.p.stop(syscall.SIGINT, 10*time.Second) }

// Kill kills the server and its backends at once, as a crash would.
func (pg *Postgres) Kill() { pg.p.stop(syscall.SIGKILL, 0) }

// Start starts a stopped server again on the same port and data folder.
func (pg *Postgres) Start(ctx context.Context) error {
	if pg.p != nil && pg.p.running() {
		return nil
	}
	return pg.start(ctx)
}

// StartInRecovery starts a stopped server as a database in recovery that
// never ends: a standby with no primary to follow and hot_standby off. It
// listens, and refuses every connection with SQLSTATE 57P03 ("the database
// system is not accepting connections"), as a server does while it replays
// its WAL after a crash, until it is stopped. Start afterwards brings it back
// as a primary on the same data.
func (pg *Postgres) StartInRecovery(ctx context.Context) error {
	if pg.p != nil && pg.p.running() {
		return fmt.Errorf("localsvc: postgres on port %d is running", pg.Port)
	}
	return pg.startAs(ctx, true)
}

// Pause stops the server and every backend (SIGSTOP): connections stay
// open and nothing answers, as on a hung host or behind a network that drops
// everything. Resume continues it.
func (pg *Postgres) Pause() error { return pg.signalAll(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (pg *Postgres) Resume() error { return pg.signalAll(syscall.SIGCONT) }

// signalAll signals the postmaster and each process it forked: these run in
// sessions of their own (setsid), so the process group does not reach them.
func (pg *Postgres) signalAll(sig syscall.Signal) error {
	if pg.p == nil || !pg.p.running() {
		return fmt.Errorf("localsvc: postgres on port %d is not running", pg.Port)
	}
	pid := pg.p.cmd.Process.Pid
	if err := syscall.Kill(pid, sig); err != nil {
		return err
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		child, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		_ = syscall.Kill(child, sig)
	}
	return nil
}

// pgAnswer sends a startup packet and says how the server answered: "" for
// an authentication request (it accepts connections), the SQLSTATE of an
// error (57P03 while it is starting up or in recovery), "?" for no answer.
func pgAnswer(addr string) string {
	c, err := dialTimeout(addr)
	if err != nil {
		return "?"
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	params := "user\x00postgres\x00database\x00postgres\x00\x00"
	n := 8 + len(params)
	msg := []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), 0, 3, 0, 0}
	msg = append(msg, params...)
	if _, err := c.Write(msg); err != nil {
		return "?"
	}
	buf := make([]byte, 2048)
	k, err := io.ReadAtLeast(c, buf, 1)
	if err != nil || k < 1 {
		return "?"
	}
	switch buf[0] {
	case 'R': // authentication request
		return ""
	case 'E': // error: fields after the 5-byte header, each a type byte and a C string
		for f := buf[5:k]; len(f) > 1; {
			end := bytes.IndexByte(f[1:], 0)
			if end < 0 {
				break
			}
			if f[0] == 'C' {
				return string(f[1 : 1+end])
			}
			f = f[2+end:]
		}
	}
	return "?"
}

func dialTimeout(addr string) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, 300*time.Millisecond)
}

// Command devstack brings up what waitroom needs on a developer machine or in
// CI, from the binaries installed there (installing the Debian packages when
// they are missing and it can):
//
//	devstack run              private Redis and PostgreSQL in .data/, migrate, seed,
//	                          then booking, admitter and gateway until Ctrl-C (booking
//	                          and admitter on loopback), the demo's origin site
//	                          (origin.go) on 127.0.0.1:8090, with each demo account's
//	                          inbox at /mail (the emails a mail sink on loopback, where
//	                          notify.smtp_url points, received), and when nginx is
//	                          installed the demo shop behind the room (shop.go)
//	                          on 127.0.0.1:8088
//	devstack test -- CMD ...  a private PostgreSQL for the test run, then CMD
//
// WAITROOM_REDIS_URL and WAITROOM_DATABASE_URL point `run` at existing servers
// instead. Nothing it starts outlives it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/service"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/mailsink"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

func main() {
	// If whatever started us (make) dies without passing on the signal,
	// stop as if interrupted: nothing we started may outlive us.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("service", "devstack")
	ctx, stop := service.Interrupted()
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: devstack run | devstack test -- CMD [ARGS...]")
		os.Exit(2)
	}
	var err error
	code := 0
	switch os.Args[1] {
	case "run":
		err = run(ctx, log)
	case "test":
		code, err = test(ctx, log, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		log.Error("devstack failed", "err", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// test starts a throwaway PostgreSQL (redis-server is started per test by
// testenv; here we only make sure it is installed), runs the command with
// WAITROOM_TEST_POSTGRES_URL set, and stops the server.
func test(ctx context.Context, log *slog.Logger, args []string) (int, error) {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return 2, errors.New("test: no command")
	}
	// What the tests run besides Go: servers, the cluster tool, the browser
	// of the end-to-end journey, Node for the SDK's and the pages' scripts
	// (and npm, for the test-only tools it installs), the alert rule
	// checker, and the sites' own proxies that forward auth sits behind.
	for _, need := range [][2]string{
		{"redis-server", "redis-server"},
		{"redis-cli", "redis-tools"},
		{"chromium", "chromium"},
		{"node", "nodejs"},
		{"npm", "npm"},
		{"promtool", "prometheus"},
		{"nginx", "nginx"},
		{"caddy", "caddy"},
	} {
		if _, err := localsvc.Ensure(need[0], need[1], "/usr/sbin"); err != nil {
			return 1, err
		}
	}
	dir, err := os.MkdirTemp("", "wr-test-pg-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	pg, err := localsvc.StartPostgres(ctx, localsvc.PostgresOptions{Dir: dir, Fast: true})
	if err != nil {
		return 1, err
	}
	defer pg.Stop()
	log.Info("private postgres for tests", "url", pg.URL("postgres"))
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), testenv.PostgresURLEnv+"="+pg.URL("postgres"))
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

func run(ctx context.Context, log *slog.Logger) error {
	cfgPath := config.Path("")
	data, err := filepath.Abs(".data")
	if err != nil {
		return err
	}
	env := os.Environ()

	redisURL := os.Getenv("WAITROOM_REDIS_URL")
	if redisURL == "" {
		r, err := localsvc.StartRedis(ctx, localsvc.RedisOptions{Dir: filepath.Join(data, "redis"), AOF: true})
		if err != nil {
			return err
		}
		defer r.Stop()
		redisURL = r.URL()
		env = append(env, "WAITROOM_REDIS_URL="+redisURL)
	}
	dbURL := os.Getenv("WAITROOM_DATABASE_URL")
	if dbURL == "" {
		pg, err := localsvc.StartPostgres(ctx, localsvc.PostgresOptions{Dir: filepath.Join(data, "pg")})
		if err != nil {
			return err
		}
		defer pg.Stop()
		if err := createDatabase(ctx, pg.URL("postgres"), "waitroom"); err != nil {
			return err
		}
		dbURL = pg.URL("waitroom")
		env = append(env, "WAITROOM_DATABASE_URL="+dbURL)
	}
	keyFile := os.Getenv("WAITROOM_SIGNING_KEY_FILE")
	if keyFile == "" {
		keyFile = filepath.Join(data, "jwt-ed25519.pem")
		env = append(env, "WAITROOM_SIGNING_KEY_FILE="+keyFile)
	}
	if made, err := pass.EnsureKeyFile(keyFile); err != nil {
		return err
	} else if made {
		log.Info("created a development signing key", "file", keyFile)
	}
	// The draw secret, as the signing key: made once and kept in .data, so
	// a lottery or a selection committed in an earlier run (its Redis kept
	// in .data too) is drawn with the secret that committed it.
	if os.Getenv("WAITROOM_DRAW_SECRET") == "" {
		secretFile := filepath.Join(data, "draw-secret")
		secret, made, err := ensureDrawSecret(secretFile)
		if err != nil {
			return err
		}
		if made {
			log.Info("created a development draw secret", "file", secretFile)
		}
		env = append(env, "WAITROOM_DRAW_SECRET="+secret)
	}
	// The demo's origin site (origin.go): its key, whose public half the
	// config trusts (auth.account_keys_file), and the operators' token it
	// credits points with.
	originKey, originPub, err := originKeys(data)
	if err != nil {
		return err
	}
	adminToken := devAdminToken()
	if os.Getenv("WAITROOM_ADMIN_TOKEN") == "" {
		env = append(env, "WAITROOM_ADMIN_TOKEN="+adminToken)
		log.Info("operators' token of this run (WAITROOM_ADMIN_TOKEN)", "token", adminToken)
	}
	log.Info("services up", "redis", redisURL, "postgres", dbURL, "config", cfgPath, "origin keys", originPub)
	if cfg, err := config.Load(cfgPath); err == nil { // (else the services say what is wrong with it)
		env = append(env, loopback(cfg, os.Getenv)...)
	}

	bin := func(name string, args ...string) *exec.Cmd {
		c := exec.Command(filepath.Join("bin", name), append([]string{"-config", cfgPath}, args...)...)
		c.Env = env
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return c
	}
	for _, step := range [][]string{{"migrate"}, {"seed"}} {
		if err := bin("booking", step...).Run(); err != nil {
			return fmt.Errorf("booking %s: %w", step[0], err)
		}
	}
	var procs []*child
	exited := make(chan error, 3)
	for _, name := range []string{"booking", "admitter", "gateway"} {
		c := &child{name: name, cmd: bin(name), done: make(chan struct{})}
		if err := c.cmd.Start(); err != nil {
			stopAll(procs)
			return fmt.Errorf("start %s: %w", name, err)
		}
		procs = append(procs, c)
		go func() {
			err := c.cmd.Wait()
			close(c.done)
			exited <- fmt.Errorf("%s exited: %v", c.name, err)
		}()
	}
	if cfg, err := config.Load(cfgPath); err == nil {
		gw := "http://localhost" + cfg.Gateway.Addr
		if _, port, err := net.SplitHostPort(cfg.Gateway.Addr); err == nil {
			gw = "http://localhost:" + port
		}
		originCtx, stopOrigin := context.WithCancel(ctx)
		defer stopOrigin()
		sink := startSink(log, cfg)
		if sink != nil {
			defer sink.Close()
		}
		go func() {
			if err := serveOrigin(originCtx, log, originKey, gw, sink); err != nil {
				log.Warn("demo origin site not started", "err", err)
			}
		}()
		if cfg.Auth.AccountKeysFile != "" {
			go welcomeCredits(originCtx, log, gw, adminToken)
		}
		go func() {
			if err := serveShop(originCtx, log, cfg, gw, adminToken); err != nil {
				log.Warn("demo shop behind the room not started", "err", err)
			}
		}()
		shop := "(not started: nginx is not installed; sudo apt-get install -y nginx)"
		if localsvc.Find("nginx", "/usr/sbin") != "" {
			shop = "http://" + shopAddr + "/drop/ and, always on, http://" + shopAddr + "/restock/"
		}
		fmt.Printf("\n  waitroom is up: %s/   (Ctrl-C stops everything)\n  demo origin site (log in as a demo account): %s/\n  the demo accounts' inboxes: %s/mail\n  demo shop behind the room (nginx): %s\n\n", gw, originURL, originURL, shop)
	}
	select {
	case <-ctx.Done():
		log.Info("stopping")
		stopAll(procs)
		return nil
	case err := <-exited:
		// Ctrl-C reaches the whole process group: a child may see it first.
		select {
		case <-ctx.Done():
			log.Info("stopping")
			stopAll(procs)
			return nil
		case <-time.After(500 * time.Millisecond):
		}
		stopAll(procs)
		return err
	}
}

// startSink starts the demo's mail sink where notify.smtp_url points, if
// that is a loopback address (the shipped config's smtp://127.0.0.1:2525):
// the emails to away fans land there, and the origin site shows them.
func startSink(log *slog.Logger, cfg *config.Config) *mailsink.Sink {
	u, err := url.Parse(cfg.Notify.SMTPURL)
	if err != nil || cfg.Notify.SMTPURL == "" || u.Scheme != "smtp" || !isLoopback(u.Hostname()) {
		return nil
	}
	sink, err := mailsink.Start(mailsink.Options{Addr: u.Host})
	if err != nil {
		log.Warn("demo mail sink not started", "addr", u.Host, "err", err)
		return nil
	}
	log.Info("demo mail sink", "smtp", sink.Addr)
	return sink
}

// loopback binds the booking API and the admitter to this machine only,
// whatever config file is used: fans reach the booking core through the
// gateway (and its payment page through a listener of its own), and the
// admitter serves only /metrics and /healthz. It returns the environment
// that puts each on 127.0.0.1 at its configured port, unless the config
// binds it to loopback already or the environment (getenv) sets it.
func loopback(cfg *config.Config, getenv func(string) string) []string {
	var env []string
	for _, a := range []struct{ name, addr string }{
		{"WAITROOM_BOOKING_ADDR", cfg.Booking.Addr},
		{"WAITROOM_ADMITTER_ADDR", cfg.Admitter.Addr},
	} {
		host, port, err := net.SplitHostPort(a.addr)
		if err != nil || getenv(a.name) != "" || isLoopback(host) {
			continue
		}
		env = append(env, a.name+"="+net.JoinHostPort("127.0.0.1", port))
	}
	return env
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// stopAll stops the children in reverse start order: gateway first, so that
// fans get a clean refusal rather than a half-served request.
func stopAll(procs []*child) {
	for i := len(procs) - 1; i >= 0; i-- {
		c := procs[i]
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(15 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
}

func createDatabase(ctx context.Context, adminURL, name string) error {
	c, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var exists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		_, err = c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	}
	return err
}

// ensureDrawSecret reads the draw secret kept in file, making one (32
// random bytes, base64url: 43 characters) if there is none; made says it
// did.
func ensureDrawSecret(file string) (secret string, made bool, err error) {
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		if s := strings.TrimSpace(string(b)); len(s) >= config.MinSecretBytes {
			return s, false, nil
		}
		return "", false, fmt.Errorf("devstack: %s holds a draw secret shorter than %d bytes: remove it to make another", file, config.MinSecretBytes)
	case !errors.Is(err, os.ErrNotExist):
		return "", false, fmt.Errorf("devstack: draw secret: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", false, fmt.Errorf("devstack: draw secret: %w", err)
	}
	secret = base64.RawURLEncoding.EncodeToString(raw[:])
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", false, fmt.Errorf("devstack: draw secret: %w", err)
	}
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("devstack: draw secret: %w", err)
	}
	return secret, true, nil
}

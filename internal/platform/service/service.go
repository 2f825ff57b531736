// Package service is how each of waitroom's processes runs: its flags and
// logger, the signals that stop it (SIGINT, SIGTERM) or reload its config
// (SIGHUP), its servers and background jobs, and one graceful shutdown with
// one grace period. Written once, for the gateway, the admitter and the
// booking core alike.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/rdb"
)

// Process is what Main hands a process's run.
type Process struct {
	// Name is the service's, as its logs and metrics say it.
	Name string
	// Config is the config file, loaded and valid; ConfigPath is where it
	// is: -config, else $WAITROOM_CONFIG, else the default.
	Config     *config.Config
	ConfigPath string
	// Args are the command line's words after the flags.
	Args []string
	Log  *slog.Logger
	// Hup receives SIGHUP (reload the config) until the process ends.
	Hup <-chan os.Signal
}

// Main runs the process named name: it parses -config (wherever it stands
// among the words), loads the config, logs JSON with the service's name,
// and calls run with a context that ends on SIGINT or SIGTERM. It exits non-zero, logging why,
// if run fails.
func Main(name string, run func(ctx context.Context, p Process) error) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	cfgFlag := fs.String("config", "", "config file (default $WAITROOM_CONFIG or "+config.DefaultPath+")")
	var args []string
	for rest := os.Args[1:]; ; {
		_ = fs.Parse(rest) // ExitOnError
		if fs.NArg() == 0 {
			break
		}
		args, rest = append(args, fs.Arg(0)), fs.Args()[1:]
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", name)
	path := config.Path(*cfgFlag)
	cfg, err := config.Load(path)
	if err == nil {
		ctx, stop := Interrupted()
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		err = run(ctx, Process{Name: name, Config: cfg, ConfigPath: path, Args: args, Log: log, Hup: hup})
		signal.Stop(hup)
		stop()
	}
	if err != nil {
		log.Error(name+" stopped", "err", err)
		os.Exit(1)
	}
}

// Interrupted is a context that ends on SIGINT or SIGTERM, every waitroom
// command's way to stop (the services' through Main, devstack's and
// rehearse's directly); stop releases the signals.
func Interrupted() (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// Redis opens the process's client of waitroom's Redis: redis.url, its
// commands counted under the process's name, its told writes waiting for
// redis.wait_replicas. The caller closes it.
func (p Process) Redis() (*rdb.Client, error) {
	return rdb.Open(p.Config.Redis.URL, p.Name, p.Config.Redis.WaitReplicas)
}

// Grace is how long a stopping process gives its servers to finish the
// requests in flight, then its jobs to finish the pass in flight.
const Grace = 15 * time.Second

// Server is one listener of a process.
type Server interface {
	// Serve serves on ln until Shutdown; it returns nil then.
	Serve(ln net.Listener) error
	Shutdown(ctx context.Context) error
}

// HTTP adapts a net/http server: Serve's ErrServerClosed is a clean stop.
func HTTP(h http.Handler) Server {
	return httpServer{&http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}
}

type httpServer struct{ *http.Server }

func (s httpServer) Serve(ln net.Listener) error {
	if err := s.Server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Listener is a server and where it listens.
type Listener struct {
	Addr   string
	Server Server
}

// Job is a background job: it runs until its context ends.
type Job func(ctx context.Context)

// Run serves every listener and runs every job until ctx ends or a server
// fails. Then, within Grace, the servers stop taking requests and finish
// those in flight, and only after them the jobs stop (a job may still have
// work a request left it) and are waited for. The addresses are bound
// before anything starts, so a taken port fails the process at once.
func Run(ctx context.Context, log *slog.Logger, listeners []Listener, jobs ...Job) error {
	lns := make([]net.Listener, len(listeners))
	for i, l := range listeners {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			for _, open := range lns[:i] {
				open.Close()
			}
			return fmt.Errorf("listen %s: %w", l.Addr, err)
		}
		lns[i] = ln
	}
	jobCtx, stopJobs := context.WithCancel(context.WithoutCancel(ctx))
	var running sync.WaitGroup
	for _, j := range jobs {
		running.Add(1)
		go func() { defer running.Done(); j(jobCtx) }()
	}
	serveErr := make(chan error, len(listeners))
	for i, l := range listeners {
		go func() {
			log.Info("listening", "addr", lns[i].Addr().String())
			serveErr <- l.Server.Serve(lns[i])
		}()
	}
	var err error
	select {
	case err = <-serveErr:
		if err == nil {
			err = errors.New("a server stopped by itself")
		}
	case <-ctx.Done():
		log.Info("shutting down")
	}
	sctx, cancel := context.WithTimeout(context.Background(), Grace)
	defer cancel()
	for _, l := range listeners {
		if serr := l.Server.Shutdown(sctx); serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
			err = errors.Join(err, serr)
		}
	}
	stopJobs()
	done := make(chan struct{})
	go func() { running.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		err = errors.Join(err, errors.New("jobs still running after the grace period"))
	}
	return err
}

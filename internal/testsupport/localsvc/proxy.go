package localsvc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A site's own reverse proxy, for waitroom's forward auth to sit behind:
// a private nginx or Caddy from Debian's packages, serving a site
// configuration the caller gives (the one docs/OPERATIONS.md shows, its
// addresses changed), on loopback, with every file it writes in a folder
// of the caller's.

// ProxyOptions shape a private nginx or Caddy.
type ProxyOptions struct {
	Dir string // configuration, logs and state; created if missing
	// Site is the site's configuration: for nginx, what goes in the http
	// block (upstreams and servers); for Caddy, site blocks.
	Site string
	// Addr is the host:port the site listens on (as Site says): the proxy
	// is ready once it accepts connections there.
	Addr string
}

// Proxy is a running private nginx or Caddy.
type Proxy struct {
	Addr string
	Log  string // its error log, for a failing test to show
	p    *proc
}

// Stop shuts the proxy down.
func (p *Proxy) Stop() { p.p.stop(syscall.SIGTERM, 5*time.Second) }

// nginxMain wraps the site's configuration in a main one that keeps
// everything in the folder (%[1]s): pid, logs and the temporary files
// (Debian's are under /var/lib/nginx, writable by root only).
const nginxMain = `daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 512; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/site.conf;
}
`

// StartNginx starts nginx (Debian's package, installed when missing and
// possible) with opts.Site and waits until it listens.
func StartNginx(ctx context.Context, opts ProxyOptions) (*Proxy, error) {
	bin, err := Ensure("nginx", "nginx", "/usr/sbin")
	if err != nil {
		return nil, err
	}
	dir, main, err := proxyDir(opts, "site.conf", "nginx.conf", nginxMain)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", main)
	return startProxy(ctx, "nginx", cmd, opts.Addr, filepath.Join(dir, "error.log"))
}

// caddyMain wraps the site's blocks: no admin endpoint (a fixed port
// shared by every Caddy), no certificates, and loopback only.
const caddyMain = `{
	admin off
	auto_https off
	default_bind 127.0.0.1
}

import %s/site.Caddyfile
`

// StartCaddy starts Caddy (Debian's package, installed when missing and
// possible) with opts.Site and waits until it listens.
func StartCaddy(ctx context.Context, opts ProxyOptions) (*Proxy, error) {
	bin, err := Ensure("caddy", "caddy")
	if err != nil {
		return nil, err
	}
	dir, main, err := proxyDir(opts, "site.Caddyfile", "Caddyfile", caddyMain)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "--adapter", "caddyfile", "--config", main)
	// Caddy keeps its state under $HOME or $XDG_*_HOME: here, the folder.
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	return startProxy(ctx, "caddy", cmd, opts.Addr, filepath.Join(dir, "caddy.log"))
}

// proxyDir makes the folder and writes in it the site's configuration as
// site and the main one as main: mainText, the folder in place of its %s.
// It returns the folder and the main configuration's path.
func proxyDir(opts ProxyOptions, site, main, mainText string) (dir, mainPath string, err error) {
	if opts.Dir == "" || opts.Addr == "" {
		return "", "", fmt.Errorf("localsvc: ProxyOptions.Dir and Addr are required")
	}
	if dir, err = filepath.Abs(opts.Dir); err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, site), []byte(opts.Site), 0o644); err != nil {
		return "", "", err
	}
	mainPath = filepath.Join(dir, main)
	return dir, mainPath, os.WriteFile(mainPath, []byte(fmt.Sprintf(mainText, dir)), 0o644)
}

func startProxy(ctx context.Context, name string, cmd *exec.Cmd, addr, logPath string) (*Proxy, error) {
	p, err := startProc(cmd, logPath)
	if err != nil {
		return nil, fmt.Errorf("localsvc: start %s: %w", name, err)
	}
	if err := waitFor(ctx, p, logPath, func() bool {
		c, err := dialTimeout(addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}); err != nil {
		p.stop(syscall.SIGKILL, 0)
		return nil, fmt.Errorf("localsvc: %s on %s: %w", name, addr, err)
	}
	return &Proxy{Addr: addr, Log: logPath, p: p}, nil
}

// Readdress is a site's configuration (one of docs/forward-auth/) with the
// addresses it names changed, each pair from → to: from must appear
// exactly once, so that a change of the file that moves an address is
// caught rather than run with the old one.
func Readdress(text string, pairs ...[2]string) (string, error) {
	for _, p := range pairs {
		if n := strings.Count(text, p[0]); n != 1 {
			return "", fmt.Errorf("localsvc: the configuration names %q %d times; want once", p[0], n)
		}
		text = strings.Replace(text, p[0], p[1], 1)
	}
	return text, nil
}

// Find is the path of the named binary (PATH or extra dirs), "" when it is
// not installed; unlike Ensure it installs nothing.
func Find(binary string, dirs ...string) string { return lookPath(binary, dirs) }

package notify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/url"
	"os"
	"sync"
	"time"
)

// SMTP sends email through one SMTP server (config notify.smtp_url), with
// the standard library's client. Mail goes over TLS (DESIGN.md, Fair play,
// third round):
//
//   - smtp://[user:pass@]host[:port] (port 25 by default): STARTTLS, and
//     no mail without it, except to a loopback host (named localhost or a
//     loopback address, and reached at one: the demo's sink);
//   - smtps://[user:pass@]host[:port] (port 465 by default): TLS from the
//     first byte;
//   - smtp+insecure://host[:port] (port 25 by default): in clear, never
//     TLS: the one explicit way, for a relay that speaks no TLS.
//
// TLS verifies the server's certificate for host against the system's
// roots (and those of notify.ca_file: RootsWith); there is no way to skip
// it. A password is sent only over TLS, or to a loopback host.
//
// One connection is kept open between the messages of a round (Close ends
// it); any error drops it, and the next message dials again.
type SMTP struct {
	addr, host string
	mode       smtpMode
	auth       *url.Userinfo
	// TLS is the client's TLS config (nil: the system's roots, the host's
	// name); RootsWith adds a CA file's roots to the system's.
	TLS *tls.Config
	// Timeout bounds one message, dial to QUIT (default 20 s).
	Timeout time.Duration
	// Hello is the name said in EHLO (default "localhost").
	Hello string
	// Dial connects to the server's host:port (nil: a net.Dialer). Tests
	// reach a host by a name that is not loopback's through it, as a
	// resolver's override would; the checks are the same.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu sync.Mutex
	c  *smtp.Client
}

// smtpMode is how a connection is secured.
type smtpMode int

const (
	startTLS smtpMode = iota // smtp://
	implicit                 // smtps://
	inClear                  // smtp+insecure://
)

// ErrNoTLS: an smtp:// server away from loopback offers no STARTTLS (or
// someone on the way took it off its answer): nothing is sent in clear.
var ErrNoTLS = errors.New("the server offers no STARTTLS: mail is not sent in clear (smtp+insecure:// would)")

// ErrClearPassword: a password would cross a connection in clear off
// loopback (smtp+insecure:// with a user and password); it is not sent.
var ErrClearPassword = errors.New("the password is never sent in clear off loopback")

// NewSMTP reads an smtp://, smtps:// or smtp+insecure:// URL.
func NewSMTP(raw string) (*SMTP, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil, errors.New("notify: smtp_url must be smtp://[user:pass@]host[:port], smtps://… or smtp+insecure://…")
	}
	m := &SMTP{host: u.Hostname(), auth: u.User, Timeout: 20 * time.Second, Hello: "localhost"}
	port := "25"
	switch u.Scheme {
	case "smtp":
		m.mode = startTLS
	case "smtps":
		m.mode, port = implicit, "465"
	case "smtp+insecure":
		m.mode = inClear
	default:
		return nil, fmt.Errorf("notify: smtp_url's scheme %q is not smtp, smtps or smtp+insecure", u.Scheme)
	}
	if p := u.Port(); p != "" {
		port = p
	}
	m.addr = net.JoinHostPort(m.host, port)
	return m, nil
}

// RootsWith is the system's roots and the CA certificates of the PEM file
// at path (config notify.ca_file: a private relay's CA); "" is the
// system's alone (nil).
func RootsWith(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("notify: ca_file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("notify: ca_file %s holds no PEM certificate", path)
	}
	return pool, nil
}

// LoopbackHost reports whether host names this machine: localhost, or a
// loopback address (127.0.0.0/8, ::1).
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopback reports whether mail to host, reached at remote, stays on this
// machine: the host is named as loopback and the connection went there
// (a "localhost" that resolved elsewhere is not).
func loopback(host string, remote net.Addr) bool {
	a, ok := remote.(*net.TCPAddr)
	return LoopbackHost(host) && ok && a.IP.IsLoopback()
}

// Addr is the server's host:port.
func (m *SMTP) Addr() string { return m.addr }

// Send sends msg from from to to, on the open connection or a new one.
func (m *SMTP) Send(ctx context.Context, from, to string, msg []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	if m.c != nil {
		if err := m.c.Reset(); err != nil {
			m.drop()
		}
	}
	if m.c == nil {
		c, err := m.dial(ctx)
		if err != nil {
			return err
		}
		m.c = c
	}
	c := m.c
	stop := context.AfterFunc(ctx, func() { c.Close() }) // a server that stops answering
	defer stop()
	if err := m.transact(from, to, msg); err != nil {
		m.drop()
		if ctx.Err() != nil {
			return fmt.Errorf("smtp %s: %w", m.addr, ctx.Err())
		}
		return fmt.Errorf("smtp %s: %w", m.addr, err)
	}
	return nil
}

func (m *SMTP) transact(from, to string, msg []byte) error {
	if err := m.c.Mail(from); err != nil {
		return err
	}
	if err := m.c.Rcpt(to); err != nil {
		return err
	}
	w, err := m.c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	return w.Close()
}

// dial connects, says hello, secures the connection and authenticates.
func (m *SMTP) dial(ctx context.Context) (*smtp.Client, error) {
	dial := m.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	conn, err := dial(ctx, "tcp", m.addr)
	if err != nil {
		return nil, fmt.Errorf("smtp %s: %w", m.addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	local := loopback(m.host, conn.RemoteAddr())
	tlsCfg := m.tlsConfig()
	if m.mode == implicit {
		tc := tls.Client(conn, tlsCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("smtp %s: tls: %w", m.addr, err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, m.host)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("smtp %s: %w", m.addr, err)
	}
	fail := func(err error) (*smtp.Client, error) {
		c.Close()
		return nil, fmt.Errorf("smtp %s: %w", m.addr, err)
	}
	if err := c.Hello(m.Hello); err != nil {
		return fail(err)
	}
	secure := m.mode == implicit
	if m.mode == startTLS {
		switch ok, _ := c.Extension("STARTTLS"); {
		case ok:
			if err := c.StartTLS(tlsCfg); err != nil {
				return fail(fmt.Errorf("starttls: %w", err))
			}
			secure = true
		case !local:
			return fail(ErrNoTLS)
		}
	}
	if m.auth != nil {
		pass, _ := m.auth.Password()
		if err := c.Auth(&plainAuth{user: m.auth.Username(), pass: pass, allowed: secure || local}); err != nil {
			return fail(fmt.Errorf("auth: %w", err))
		}
	}
	// The connection outlives this message's deadline (the next ones set
	// theirs through ctx).
	_ = conn.SetDeadline(time.Time{})
	return c, nil
}

// plainAuth is AUTH PLAIN (RFC 4616) that sends the password only where
// the rule allows it (allowed: over TLS, or to a loopback host): smtp's
// own PlainAuth judges by the name alone, and knows only 127.0.0.1.
type plainAuth struct {
	user, pass string
	allowed    bool
}

func (a *plainAuth) Start(si *smtp.ServerInfo) (string, []byte, error) {
	if !si.TLS && !a.allowed {
		return "", nil, ErrClearPassword
	}
	return "PLAIN", []byte("\x00" + a.user + "\x00" + a.pass), nil
}

func (a *plainAuth) Next(_ []byte, more bool) ([]byte, error) {
	if more {
		return nil, errors.New("unexpected server challenge")
	}
	return nil, nil
}

func (m *SMTP) tlsConfig() *tls.Config {
	if m.TLS != nil {
		c := m.TLS.Clone()
		if c.ServerName == "" {
			c.ServerName = m.host
		}
		return c
	}
	return &tls.Config{ServerName: m.host, MinVersion: tls.VersionTLS12}
}

func (m *SMTP) drop() {
	if m.c != nil {
		_ = m.c.Close()
		m.c = nil
	}
}

// Close says QUIT on the open connection, if one is.
func (m *SMTP) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c == nil {
		return nil
	}
	err := m.c.Quit()
	m.drop()
	return err
}

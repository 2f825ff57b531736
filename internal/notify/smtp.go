package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/url"
	"sync"
	"time"
)

// SMTP sends email through one SMTP server (config notify.smtp_url), with
// the standard library's client:
//
//   - smtp://[user:pass@]host[:port] (port 25 by default): STARTTLS
//     whenever the server offers it; AUTH (PLAIN) only over TLS, or to a
//     server on loopback: a password never crosses a network in clear;
//   - smtps://[user:pass@]host[:port] (port 465 by default): TLS from the
//     first byte.
//
// One connection is kept open between the messages of a round (Close ends
// it); any error drops it, and the next message dials again.
type SMTP struct {
	addr, host string
	implicit   bool
	auth       *url.Userinfo
	// TLS is the client's TLS config (nil: the system's roots, the host's
	// name); tests trust their own server's certificate with it.
	TLS *tls.Config
	// Timeout bounds one message, dial to QUIT (default 20 s).
	Timeout time.Duration
	// Hello is the name said in EHLO (default "localhost").
	Hello string

	mu sync.Mutex
	c  *smtp.Client
}

// NewSMTP reads an smtp:// or smtps:// URL.
func NewSMTP(raw string) (*SMTP, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || (u.Scheme != "smtp" && u.Scheme != "smtps") {
		return nil, errors.New("notify: smtp_url must be smtp://[user:pass@]host[:port] or smtps://…")
	}
	m := &SMTP{host: u.Hostname(), implicit: u.Scheme == "smtps", auth: u.User, Timeout: 20 * time.Second, Hello: "localhost"}
	port := u.Port()
	if port == "" {
		port = "25"
		if m.implicit {
			port = "465"
		}
	}
	m.addr = net.JoinHostPort(m.host, port)
	return m, nil
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
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.addr)
	if err != nil {
		return nil, fmt.Errorf("smtp %s: %w", m.addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	tlsCfg := m.tlsConfig()
	if m.implicit {
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
	if !m.implicit {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsCfg); err != nil {
				return fail(fmt.Errorf("starttls: %w", err))
			}
		}
	}
	if m.auth != nil {
		pass, _ := m.auth.Password()
		// PlainAuth itself refuses a connection that is neither TLS nor to
		// localhost: the password is never sent in clear over a network.
		if err := c.Auth(smtp.PlainAuth("", m.auth.Username(), pass, m.host)); err != nil {
			return fail(fmt.Errorf("auth: %w", err))
		}
	}
	// The connection outlives this message's deadline (the next ones set
	// theirs through ctx).
	_ = conn.SetDeadline(time.Time{})
	return c, nil
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

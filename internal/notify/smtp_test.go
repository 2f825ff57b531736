package notify_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/notify"
	"github.com/waitroom/waitroom/internal/testsupport/mailsink"
)

// mailHost is a name that is not loopback's: the tests reach their sink
// by it through SMTP.Dial, as a resolver's override would (the connection
// itself goes to 127.0.0.1; the client judges the name it was given).
const mailHost = "mail.example.test"

// via is an SMTP client of url whose connections to mailHost reach the
// sink at addr.
func via(t *testing.T, raw, addr string) *notify.SMTP {
	t.Helper()
	m, err := notify.NewSMTP(raw)
	if err != nil {
		t.Fatal(err)
	}
	m.Timeout = 5 * time.Second
	m.Dial = func(ctx context.Context, network, to string) (net.Conn, error) {
		if h, _, _ := net.SplitHostPort(to); h == mailHost {
			to = addr
		}
		var d net.Dialer
		return d.DialContext(ctx, network, to)
	}
	return m
}

func port(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

// Mail goes over TLS (DESIGN.md, Fair play, third round), against the real
// SMTP server in each of its modes: smtp:// takes STARTTLS and sends
// nothing without it, except to loopback; smtps:// is TLS from the first
// byte; smtp+insecure:// is the one way in clear. The server's certificate
// is always verified: one not trusted (no CA file naming it) is refused.
func TestMailGoesOverTLS(t *testing.T) {
	sinks := map[string]*mailsink.Sink{}
	for name, o := range map[string]mailsink.Options{
		"plain":     {},
		"plain2":    {Addr: "127.0.0.2:0"},
		"starttls":  {TLS: true, Names: []string{mailHost}, User: "room", Password: "s3cret"},
		"implicit":  {ImplicitTLS: true, Names: []string{mailHost}, User: "room", Password: "s3cret"},
		"plainauth": {User: "room", Password: "s3cret"},
	} {
		s, err := mailsink.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		sinks[name] = s
	}
	for _, c := range []struct {
		name   string
		url    string
		sink   string
		trust  bool
		tls    bool  // sent, over TLS or not
		refuse error // not sent (nil: any error)
		sent   bool
	}{
		{name: "smtp:// to a loopback address without STARTTLS: the demo's sink, in clear", url: "smtp://127.0.0.1:%p", sink: "plain", sent: true},
		{name: "smtp:// to localhost without STARTTLS", url: "smtp://localhost:%p", sink: "plain", sent: true},
		{name: "smtp:// to 127.0.0.2 is loopback too", url: "smtp://127.0.0.2:%p", sink: "plain2", sent: true},
		{name: "smtp:// off loopback without STARTTLS: refused", url: "smtp://" + mailHost + ":%p", sink: "plain", refuse: notify.ErrNoTLS},
		{name: "smtp:// off loopback with STARTTLS", url: "smtp://room:s3cret@" + mailHost + ":%p", sink: "starttls", trust: true, sent: true, tls: true},
		{name: "smtp:// on loopback takes STARTTLS when offered", url: "smtp://room:s3cret@127.0.0.1:%p", sink: "starttls", trust: true, sent: true, tls: true},
		{name: "smtp:// with a certificate not trusted: refused", url: "smtp://room:s3cret@" + mailHost + ":%p", sink: "starttls"},
		{name: "smtp:// on loopback with a certificate not trusted: refused", url: "smtp://room:s3cret@127.0.0.1:%p", sink: "starttls"},
		{name: "smtps:// TLS from the first byte", url: "smtps://room:s3cret@" + mailHost + ":%p", sink: "implicit", trust: true, sent: true, tls: true},
		{name: "smtps:// with a certificate not trusted: refused", url: "smtps://room:s3cret@" + mailHost + ":%p", sink: "implicit"},
		{name: "smtps:// to a server that speaks in clear: refused", url: "smtps://" + mailHost + ":%p", sink: "plain"},
		{name: "smtp+insecure:// off loopback: in clear, by choice", url: "smtp+insecure://" + mailHost + ":%p", sink: "plain", sent: true},
		{name: "smtp+insecure:// sends no password in clear off loopback", url: "smtp+insecure://room:s3cret@" + mailHost + ":%p", sink: "plainauth", refuse: notify.ErrClearPassword},
		{name: "smtp+insecure:// sends its password to loopback", url: "smtp+insecure://room:s3cret@127.0.0.1:%p", sink: "plainauth", sent: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := sinks[c.sink]
			before := len(s.Messages())
			m := via(t, strings.Replace(c.url, "%p", port(s.Addr), 1), s.Addr)
			if c.trust {
				m.TLS = &tls.Config{RootCAs: s.CertPool()}
			}
			err := m.Send(context.Background(), "noreply@example.com", "fan@example.test", []byte("Subject: x\r\n\r\nx\r\n"))
			m.Close()
			got := s.Messages()[before:]
			if !c.sent {
				if err == nil || len(got) != 0 {
					t.Fatalf("sent (%v, %d emails); want refused", err, len(got))
				}
				if c.refuse != nil && !errors.Is(err, c.refuse) {
					t.Errorf("error %v; want %v", err, c.refuse)
				}
				return
			}
			if err != nil || len(got) != 1 {
				t.Fatalf("Send = %v, %d emails; want sent", err, len(got))
			}
			if got[0].TLS != c.tls {
				t.Errorf("over TLS %v; want %v", got[0].TLS, c.tls)
			}
		})
	}
}

// smtp+insecure:// to a server that offers STARTTLS sends in clear all the
// same (the operator chose it), and the server sees no TLS.
func TestInsecureIsInClear(t *testing.T) {
	s, err := mailsink.Start(mailsink.Options{TLS: true, Names: []string{mailHost}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m := via(t, "smtp+insecure://"+mailHost+":"+port(s.Addr), s.Addr)
	if err := m.Send(context.Background(), "noreply@example.com", "fan@example.test", []byte("Subject: x\r\n\r\nx\r\n")); err != nil {
		t.Fatal(err)
	}
	if got := s.Messages(); len(got) != 1 || got[0].TLS {
		t.Fatalf("%d emails (TLS %v); want one, in clear", len(got), len(got) == 1 && got[0].TLS)
	}
}

// notify.ca_file: the roots of a CA file are trusted besides the system's;
// a file with no certificate, or none, is an error, never "trust all".
func TestRootsWith(t *testing.T) {
	s, err := mailsink.Start(mailsink.Options{TLS: true, Names: []string{mailHost}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, s.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	pool, err := notify.RootsWith(ca)
	if err != nil {
		t.Fatal(err)
	}
	m := via(t, "smtp://"+mailHost+":"+port(s.Addr), s.Addr)
	m.TLS = &tls.Config{RootCAs: pool}
	if err := m.Send(context.Background(), "noreply@example.com", "fan@example.test", []byte("Subject: x\r\n\r\nx\r\n")); err != nil {
		t.Fatalf("with the CA file: %v", err)
	}
	if pool, err := notify.RootsWith(""); pool != nil || err != nil {
		t.Errorf("RootsWith(\"\") = %v, %v; want the system's (nil)", pool, err)
	}
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, []byte("not a certificate\n"), 0o644)
	for _, p := range []string{empty, filepath.Join(dir, "missing.pem")} {
		if _, err := notify.RootsWith(p); err == nil {
			t.Errorf("RootsWith(%s): no error", p)
		}
	}
}

// The schemes: each of the three, and any other named in the error.
func TestNewSMTPSchemes(t *testing.T) {
	for raw, want := range map[string]string{
		"smtp://mail.example.com":           "mail.example.com:25",
		"smtp://mail.example.com:587":       "mail.example.com:587",
		"smtps://mail.example.com":          "mail.example.com:465",
		"smtp+insecure://relay.internal":    "relay.internal:25",
		"smtp+insecure://relay.internal:26": "relay.internal:26",
	} {
		m, err := notify.NewSMTP(raw)
		if err != nil || m.Addr() != want {
			t.Errorf("NewSMTP(%s) = %v, %v; want %s", raw, m, err, want)
		}
	}
	for _, raw := range []string{"http://mail.example.com", "smtp+tls://mail.example.com", "mail.example.com:25", "smtp://"} {
		_, err := notify.NewSMTP(raw)
		if u, _ := url.Parse(raw); err == nil || (u != nil && u.Scheme != "" && u.Host != "" && !strings.Contains(err.Error(), u.Scheme)) {
			t.Errorf("NewSMTP(%s) = %v; want an error naming its scheme", raw, err)
		}
	}
}

// Package mailsink is a real SMTP server that keeps every email it accepts
// in memory, for tests and for `make run` (the demo origin site shows each
// demo account's inbox from it). It is built on github.com/emersion/go-smtp:
// EHLO, STARTTLS or TLS from the first byte (with a certificate of its own,
// made at start, that CertPool and CertPEM trust), AUTH PLAIN, MAIL, RCPT,
// DATA as any server speaks them; it can refuse a number of messages first
// (a server that fails, then recovers), or take its time over each (a slow
// one).
package mailsink

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Options shape a sink.
type Options struct {
	// Addr to listen on (default 127.0.0.1:0, a free port).
	Addr string
	// TLS offers STARTTLS with a self-signed certificate for 127.0.0.1,
	// localhost and Names (CertPool trusts it).
	TLS bool
	// ImplicitTLS speaks TLS from the first byte (as on port 465, an
	// smtps:// server) with that certificate; no STARTTLS.
	ImplicitTLS bool
	// Names are more DNS names the certificate is for (a test reaches the
	// sink by a name that is not loopback's).
	Names []string
	// User and Password, when set, make AUTH PLAIN required before MAIL.
	User, Password string
	// Delay is how long the server takes over each message's data before
	// it answers (a slow server): the client waits that long for its 250.
	Delay time.Duration
}

// Message is one email the sink accepted.
type Message struct {
	From string
	To   []string
	Data []byte // as received
	At   time.Time
	// TLS: it came over a connection secured by STARTTLS or implicit TLS.
	TLS bool
	// Read from Data: the headers, the subject decoded, and the plain
	// text and HTML parts decoded.
	Header    mail.Header
	Subject   string
	MessageID string
	Text      string
	HTML      string
}

// Sink is a running SMTP server.
type Sink struct {
	Addr string
	o    Options
	srv  *smtp.Server
	pool *x509.CertPool
	pem  []byte

	mu      sync.Mutex
	msgs    []Message
	refuse  int   // DATA commands still to refuse
	hold    *hold // the next DATA waits for its release
	changed chan struct{}
}

type hold struct{ held, release chan struct{} }

// Hold makes the next message wait at RCPT, before its data is sent,
// until release is called: a test kills its sender meanwhile, mid-send (a
// message whose client died there is never accepted; one whose client
// died after sending its data but before the server's answer would be,
// as by any SMTP server). held is closed once a message waits.
func (s *Sink) Hold() (held <-chan struct{}, release func()) {
	h := &hold{held: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	s.hold = h
	s.mu.Unlock()
	var once sync.Once
	return h.held, func() { once.Do(func() { close(h.release) }) }
}

// takeHold is the hold waiting for the next message, if any.
func (s *Sink) takeHold() *hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hold
	s.hold = nil
	return h
}

// Start listens and serves until Close.
func Start(o Options) (*Sink, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	s := &Sink{o: o, changed: make(chan struct{})}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s, conn: c}, nil
	}))
	s.srv.Domain = "localhost"
	s.srv.ReadTimeout = 30 * time.Second
	s.srv.WriteTimeout = 30 * time.Second
	s.srv.MaxMessageBytes = 1 << 20
	s.srv.MaxRecipients = 10
	// AUTH is offered in clear too, as many servers do: whether a password
	// may cross a connection is the client's rule, and its tests need a
	// server that would take it.
	s.srv.AllowInsecureAuth = true
	var tlsCfg *tls.Config
	if o.TLS || o.ImplicitTLS {
		cert, pool, err := selfSigned(o.Names)
		if err != nil {
			return nil, err
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.pool = pool
		s.pem = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	}
	if o.TLS && !o.ImplicitTLS {
		s.srv.TLSConfig = tlsCfg // offered as STARTTLS
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("mail sink: %w", err)
	}
	if o.ImplicitTLS {
		ln = tls.NewListener(ln, tlsCfg)
	}
	s.Addr = ln.Addr().String()
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is notify.smtp_url for this sink (with its user and password):
// smtps:// with ImplicitTLS, else smtp://.
func (s *Sink) URL() string {
	u := url.URL{Scheme: "smtp", Host: s.Addr}
	if s.o.ImplicitTLS {
		u.Scheme = "smtps"
	}
	if s.o.User != "" {
		u.User = url.UserPassword(s.o.User, s.o.Password)
	}
	return u.String()
}

// CertPool trusts the sink's certificate (nil without TLS).
func (s *Sink) CertPool() *x509.CertPool { return s.pool }

// CertPEM is the sink's certificate, PEM (a CA file that trusts it: config
// notify.ca_file); nil without TLS.
func (s *Sink) CertPEM() []byte { return s.pem }

// Close stops the server.
func (s *Sink) Close() error { return s.srv.Close() }

// Refuse makes the next n messages fail at DATA with 451 (a temporary
// failure, as a busy server answers).
func (s *Sink) Refuse(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = n
}

// Refusing is how many of the messages Refuse named are still to be
// refused.
func (s *Sink) Refusing() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refuse
}

// Messages are every email accepted so far, oldest first.
func (s *Sink) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// For are the emails accepted for address to, oldest first.
func (s *Sink) For(to string) []Message {
	var out []Message
	for _, m := range s.Messages() {
		for _, r := range m.To {
			if strings.EqualFold(r, to) {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// Wait waits until at least n emails are accepted for to (every address:
// to "") and returns them, or ctx's error.
func (s *Sink) Wait(ctx context.Context, to string, n int) ([]Message, error) {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		got := s.Messages()
		if to != "" {
			got = s.For(to)
		}
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("mail sink: %d of %d emails for %q: %w", len(got), n, to, ctx.Err())
		case <-ch:
		}
	}
}

func (s *Sink) keep(m Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse > 0 {
		s.refuse--
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	s.msgs = append(s.msgs, m)
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

type session struct {
	s      *Sink
	conn   *smtp.Conn
	authed bool
	from   string
	to     []string
}

func (x *session) AuthMechanisms() []string {
	if x.s.o.User == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (x *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != x.s.o.User || pass != x.s.o.Password {
			return errors.New("invalid credentials")
		}
		x.authed = true
		return nil
	}), nil
}

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	if x.s.o.User != "" && !x.authed {
		return smtp.ErrAuthRequired
	}
	x.from = from
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if h := x.s.takeHold(); h != nil {
		close(h.held)
		<-h.release
	}
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	time.Sleep(x.s.o.Delay)
	_, secure := x.conn.TLSConnectionState()
	m := Message{From: x.from, To: append([]string(nil), x.to...), Data: b, At: time.Now(), TLS: secure}
	parse(&m)
	return x.s.keep(m)
}

func (x *session) Reset() { x.from, x.to = "", nil }

func (x *session) Logout() error { return nil }

// parse reads the headers and the text and HTML parts of m.Data; what it
// cannot read stays empty.
func parse(m *Message) {
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		return
	}
	m.Header = msg.Header
	dec := new(mime.WordDecoder)
	if sub, err := dec.DecodeHeader(msg.Header.Get("Subject")); err == nil {
		m.Subject = sub
	}
	m.MessageID = msg.Header.Get("Message-ID")
	typ, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(typ, "multipart/") {
		body, _ := io.ReadAll(msg.Body)
		m.Text = string(body)
		return
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if err != nil {
			return
		}
		var r io.Reader = p
		if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
			r = quotedprintable.NewReader(p)
		}
		body, _ := io.ReadAll(r)
		pt, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		switch pt {
		case "text/plain":
			m.Text = string(body)
		case "text/html":
			m.HTML = string(body)
		}
	}
}

// selfSigned makes a certificate for 127.0.0.1, localhost and names, and a
// pool that trusts it.
func selfSigned(names []string) (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "waitroom mail sink"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     append([]string{"localhost"}, names...),
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool, nil
}

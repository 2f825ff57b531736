// Package config loads, overrides and validates the one configuration file that
// the gateway, the admitter and the booking core share (configs/waitroom.yaml).
//
// The schema is the contract of DESIGN.md: unknown keys are refused so that a
// typo never passes silently, and every problem is reported at once, each named
// by its key path.
package config

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// DefaultPath is where the config is read from when neither -config nor
// WAITROOM_CONFIG names another file.
const DefaultPath = "configs/waitroom.yaml"

// Modes an event can be in.
const (
	ModeQueue       = "queue"
	ModeAuto        = "auto" // straight through while nobody waits and there is room (DESIGN.md, "Always on")
	ModePassthrough = "passthrough"
	ModePaused      = "paused"
	ModeClosed      = "closed"
)

// Config is the whole file.
type Config struct {
	Redis    Redis    `yaml:"redis"`
	Postgres Postgres `yaml:"postgres"`
	Auth     Auth     `yaml:"auth"`
	Gateway  Gateway  `yaml:"gateway"`
	Admitter Admitter `yaml:"admitter"`
	Notify   Notify   `yaml:"notify"`
	Booking  Booking  `yaml:"booking"`
	Events   []Event  `yaml:"events"`
	// Webhooks receive the room's notifications (integrations.go).
	Webhooks []Webhook `yaml:"webhooks"`
}

type Redis struct {
	// URL is a redis:// URL, or a comma-separated list of host:port seeds of a
	// Redis Cluster.
	URL string `yaml:"url"`
	// WaitReplicas > 0: the writes a fan is told of (a place, an
	// admission) are answered only once that many replicas of their master
	// have them (WAIT): a failover then loses none of them. 0 (the default)
	// answers at once; docs/RELIABILITY.md gives what a failover may lose
	// then, and what the wait costs.
	WaitReplicas int `yaml:"wait_replicas"`
}

type Postgres struct {
	URL string `yaml:"url"`
}

type Auth struct {
	TicketSecret   string `yaml:"ticket_secret"`
	SigningKeyFile string `yaml:"signing_key_file"`
	AdminToken     string `yaml:"admin_token"`
	// AccountKeysFile is the origin site's Ed25519 public key(s), PEM
	// ("PUBLIC KEY" blocks), that sign account tokens; "" = no accounts.
	AccountKeysFile string `yaml:"account_keys_file"`
	// DrawSecret keys the seeds of the lottery's and the selection's draws
	// (package draw): Redis keeps only a nonce and the commitment, so one
	// who reads it before a draw cannot compute the seed. Needed by a
	// config with a pre-queue or a presale.
	DrawSecret string `yaml:"draw_secret"`
	// Tokens are the operators' named tokens, each with its scopes and
	// events (integrations.go).
	Tokens []Token `yaml:"tokens"`
}

type Gateway struct {
	Addr       string `yaml:"addr"`
	BookingURL string `yaml:"booking_url"`
	// JoinsPerIPPerMinute limits joins per client IP; 0 disables the limit.
	JoinsPerIPPerMinute *int `yaml:"joins_per_ip_per_minute"`
	// ProxyTimeout bounds one proxied call to the booking core (504 past it).
	// Keep it above the booking core's own bound (booking.RequestBudget, 5 s),
	// so that a database that stops answering reaches the fan as the booking
	// core's 503 with Retry-After.
	ProxyTimeout Duration `yaml:"proxy_timeout"`
	// TrustedProxies are the CIDRs (or single addresses) of the load
	// balancers in front: only from them are X-Forwarded-For,
	// X-Forwarded-Host and X-Forwarded-Proto believed (see Fair play in
	// DESIGN.md).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// IPv6Prefix is how many leading bits of an IPv6 address the per-IP
	// join limit counts by (default 64): one home or one server is given a
	// whole /64, and counted address by address it would be 2^64 budgets.
	// An IPv4 address counts alone.
	IPv6Prefix *int `yaml:"ipv6_prefix"`
	// PublicURL is how fans reach the gateway (absolute http(s), no query
	// or fragment; a trailing slash is dropped): the base of the links a
	// page prints, the share link and its QR code. "" = the request's own
	// host and scheme (a trusted proxy's X-Forwarded-Host and -Proto).
	PublicURL string `yaml:"public_url"`
}

type Admitter struct {
	Addr string   `yaml:"addr"`
	Tick Duration `yaml:"tick"`
	// Adaptive holds the thresholds of admission.adaptive: when the booking
	// core struggles, the events that ask for it are slowed down.
	Adaptive Adaptive `yaml:"adaptive"`
}

// Adaptive is when the admitter finds the booking core struggling, and how
// it slows down and speeds up again (events with admission.adaptive: true).
// The signals are the booking core's own, over its last 10 s.
type Adaptive struct {
	// HoldP99 above this (the hold route's latency, 99th percentile) is
	// struggling. Default 500ms.
	HoldP99 Duration `yaml:"hold_p99"`
	// ErrorShare above this (the share of 5xx answers, counted once the
	// window has at least 20 requests) is struggling. Default 0.05.
	ErrorShare float64 `yaml:"error_share"`
	// Step is how much of the configured rate comes back per interval once
	// healthy. Default 0.1.
	Step float64 `yaml:"step"`
	// Interval is the least time between two changes: each halving or
	// step sees fresh signals. Default 5s.
	Interval Duration `yaml:"interval"`
	// Floor is the least share of the configured rate it halves down to.
	// Default 0.05.
	Floor float64 `yaml:"floor"`
}

// Notify is the email to fans who stepped away from the page (DESIGN.md,
// "Away from the page"). The admitter sends it.
type Notify struct {
	// SMTPURL is smtp://[user:pass@]host[:port] (STARTTLS, and no mail
	// without it except to a loopback host), smtps://… (TLS from the first
	// byte, port 465 by default) or smtp+insecure://host[:port] (in clear:
	// the one explicit way; a password only to a loopback host); "" = no
	// email (the away route is then 404). DESIGN.md, "Mail goes over TLS".
	SMTPURL string `yaml:"smtp_url"`
	// CAFile (beyond the contract) is a PEM file of CA certificates
	// trusted for the SMTP server's certificate besides the system's
	// roots (a private relay's CA); "" = the system's alone. Read by the
	// admitter at start.
	CAFile string `yaml:"ca_file"`
	// From is the From header of every email, "name <address>" or an
	// address.
	From string `yaml:"from"`
	// PerAccountPerHour (beyond the contract) bounds how many times one
	// account may step away in an hour, so how many emails its token can
	// ask the room to send (default 10).
	PerAccountPerHour int `yaml:"per_account_per_hour"`
	// Timeout (beyond the contract) bounds one email's delivery to the
	// SMTP server, dial to the end of DATA (default 20s). A sender that
	// dies mid-send leaves its emails to another after 2 × timeout + 5 s.
	Timeout Duration `yaml:"timeout"`
}

type Booking struct {
	Addr            string   `yaml:"addr"`
	JWKSURL         string   `yaml:"jwks_url"`
	PublicKeyFile   string   `yaml:"public_key_file"`
	HoldTTL         Duration `yaml:"hold_ttl"`
	MaxSeatsPerHold int      `yaml:"max_seats_per_hold"`
	// HoldsPerMinute caps the holds one customer may take per minute (429 past it).
	HoldsPerMinute int `yaml:"holds_per_minute"`
	// HoldAttemptsPerMinute caps the hold requests one customer may make per
	// minute, refused ones included (429 past it).
	HoldAttemptsPerMinute int `yaml:"hold_attempts_per_minute"`
	// ReholdCooldown keeps a seat out of a customer's reach this long after
	// a hold of theirs on it was released or lapsed; nil = hold_ttl, 0 = off.
	ReholdCooldown *Duration `yaml:"rehold_cooldown"`
	// Currency is the ISO 4217 code every *_cents amount is in, counted in
	// its minor unit: cents of USD, but whole yen or won (JPY and KRW have
	// no minor unit, so price_cents: 1500 is ¥1,500).
	Currency string  `yaml:"currency"`
	Payment  Payment `yaml:"payment"`
}

type Payment struct {
	Secret         string   `yaml:"secret"`
	SessionTTL     Duration `yaml:"session_ttl"`
	ReconcileAfter Duration `yaml:"reconcile_after"`
	// ReturnBaseURL (beyond the contract) is the gateway as fans' browsers
	// reach it: the provider sends the fan back to
	// <return_base_url>/e/{event}/book?booking=<id>. Default: http://localhost
	// (or gateway.addr's host) on gateway.addr's port.
	ReturnBaseURL string    `yaml:"return_base_url"`
	Simulator     Simulator `yaml:"simulator"`
}

// Simulator configures the in-process payment provider used by the demo and tests.
type Simulator struct {
	Enabled   bool     `yaml:"enabled"`
	Outcome   string   `yaml:"outcome"` // succeed | fail
	Delay     Duration `yaml:"delay"`
	Duplicate bool     `yaml:"duplicate"`
	Drop      bool     `yaml:"drop"`
	// Addr (beyond the contract): a listener of its own for the
	// simulator's hosted payment page (/pay/ and /healthz, nothing else), so
	// that it can be published where the booking API must not be. Default
	// "": the page is served on booking.addr.
	Addr string `yaml:"addr"`
	// PageURL (beyond the contract) is where fans' browsers reach the
	// simulator's hosted payment page (under /pay/). Default: http://localhost
	// (or the listener's host) on the port of addr, else of booking.addr.
	PageURL string `yaml:"page_url"`
	// AutoPay (beyond the contract): every session pays by itself (outcome,
	// delay after it opens) with nobody on its page: for API clients and
	// load tests. Default false: the fan decides on the page.
	AutoPay bool `yaml:"auto_pay"`
}

type Event struct {
	ID              string     `yaml:"id"`
	Name            string     `yaml:"name"`
	Mode            string     `yaml:"mode"`
	PrequeueOpensAt *time.Time `yaml:"prequeue_opens_at"`
	OpensAt         *time.Time `yaml:"opens_at"`
	ClosesAt        *time.Time `yaml:"closes_at"`
	// Venue is where the event takes place, shown on the fans' pages.
	Venue     string    `yaml:"venue"`
	Admission Admission `yaml:"admission"`
	// Presale is the event's registration, selection and staggered
	// windows (nil: none; DESIGN.md "Presale").
	Presale   *Presale   `yaml:"presale"`
	Showtimes []Showtime `yaml:"showtimes"`
	// Protect lists the paths of other sites this event guards, behind
	// their own reverse proxy (forward auth, protect.go).
	Protect []Protect `yaml:"protect"`
	// Bypass lets some requests to the guarded paths through forward auth
	// with no pass (protect.go).
	Bypass Bypass `yaml:"bypass"`
	// Page is the site's own look of the event's pages (DESIGN.md, "The
	// site's own look"); unset, the built-in pages.
	Page Page `yaml:"page"`
}

// Page is an event's page folder (docs/PAGES.md): its own room.html and
// register.html, messages.<lang>.yaml and assets/. Only the gateway reads
// the folder, at start and at each reload; Validate checks the key alone,
// never the disk, since the admitter and the booking core load the same
// file on machines that may not have the folder.
type Page struct {
	// Dir is the folder, absolute or relative to the working directory as
	// every path of the file ("" = the built-in pages).
	Dir string `yaml:"dir"`
}

// Presale is an event's presale: accounts register between the two times,
// the selection is drawn at the close, Selected registrants are invited in
// groups of GroupSize, group g may join from opens_at + g × Window (and
// until it closes a Window later), and from GeneralSaleAt (if set) anyone
// may join.
type Presale struct {
	RegistrationOpensAt  *time.Time   `yaml:"registration_opens_at"`
	RegistrationClosesAt *time.Time   `yaml:"registration_closes_at"`
	Selected             int          `yaml:"selected"`
	GroupSize            int          `yaml:"group_size"`
	Window               Duration     `yaml:"window"`
	GeneralSaleAt        OptionalTime `yaml:"general_sale_at"`
}

// OptionalTime is an RFC 3339 time that may be absent or "" (none).
type OptionalTime struct{ At *time.Time }

func (t *OptionalTime) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: must be an RFC 3339 time or \"\"", n.Line)
	}
	if s == "" {
		t.At = nil
		return nil
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not an RFC 3339 time (e.g. 2026-12-01T10:00:00Z)", n.Line, s)
	}
	t.At = &at
	return nil
}

func (t OptionalTime) MarshalYAML() (any, error) {
	if t.At == nil {
		return "", nil
	}
	return t.At.Format(time.RFC3339), nil
}

type Admission struct {
	// AdmitPerSecond is nil when the rate is to be computed from Capacity.
	AdmitPerSecond *float64 `yaml:"admit_per_second"`
	// MaxActive is nil when the cap is to be computed by Little's law.
	MaxActive *int     `yaml:"max_active"`
	Capacity  Capacity `yaml:"capacity"`
	// Shards spreads the event's line over that many Redis hash tags (on a
	// Cluster, that many masters); 0 and 1 are one. Fixed once the event's
	// line has state (line.Settings.Shards).
	Shards       int      `yaml:"shards"`
	AccessTTL    Duration `yaml:"access_ttl"`
	AbandonAfter Duration `yaml:"abandon_after"`
	// JoinProofBits is the proof of work a new place costs: about
	// 2^JoinProofBits SHA-256 hashes (0 = off, at most MaxJoinProofBits).
	// The gateway reads it from the config in force, so an edit acts at once.
	JoinProofBits int `yaml:"join_proof_bits"`
	// Adaptive lets the admitter halve the event's rate by itself while the
	// booking core struggles (admitter.adaptive), and bring it back step by
	// step once healthy.
	Adaptive bool `yaml:"adaptive"`
	// Accounts is AccountsOptional ("" too) or AccountsRequired: a join
	// without a valid account token is then refused.
	Accounts string `yaml:"accounts"`
	// Codes is CodesOff ("" too) or CodesRequired: a new place then spends
	// one use of an access code.
	Codes string `yaml:"codes"`
	// AwayClaimWithin is how long an away fan's place, once admitted,
	// waits for its fan to open the emailed link (default 10m); past it
	// the place is given up and counted as abandoned.
	AwayClaimWithin Duration `yaml:"away_claim_within"`
	// Session is SessionFixed (the default) or SessionSliding: how long an
	// admitted place lasts (DESIGN.md, "Sessions that last while they are
	// used"). Fixed: access_ttl from its claim (a hold may stretch it).
	// Sliding: access_ttl from its pass's last use, renewed as it is used.
	Session string `yaml:"session"`
}

// Values of admission.session.
const (
	SessionFixed   = "fixed"
	SessionSliding = "sliding"
)

// Sliding reports whether each use of the event's passes renews its place.
func (a Admission) Sliding() bool { return a.Session == SessionSliding }

// Values of admission.codes.
const (
	CodesOff      = "off"
	CodesRequired = "required"
)

// CodesRequired reports whether a new place of the event spends an access
// code.
func (a Admission) CodesRequired() bool { return a.Codes == CodesRequired }

// Values of admission.accounts.
const (
	AccountsOptional = "optional"
	AccountsRequired = "required"
)

// AccountsRequired reports whether the event refuses joins without an
// account token.
func (a Admission) AccountsRequired() bool { return a.Accounts == AccountsRequired }

// Capacity models the booking core, from which an absent rate and cap are computed.
type Capacity struct {
	BackendTPS     float64 `yaml:"backend_tps"`
	CallsPerUser   float64 `yaml:"calls_per_user"`
	RetryFactor    float64 `yaml:"retry_factor"`
	SessionSeconds float64 `yaml:"session_seconds"`
}

type Showtime struct {
	ID               int64     `yaml:"id"`
	Title            string    `yaml:"title"`
	StartsAt         time.Time `yaml:"starts_at"`
	Rows             int       `yaml:"rows"`
	SeatsPerRow      int       `yaml:"seats_per_row"`
	PriceCents       int64     `yaml:"price_cents"`
	GeneralAdmission []GABlock `yaml:"general_admission"`
}

// GABlock is a general-admission (standing) block sold by count.
type GABlock struct {
	Code       string `yaml:"code"`
	Capacity   int    `yaml:"capacity"`
	PriceCents int64  `yaml:"price_cents"`
}

// Duration is a time.Duration written as "10m", "1s" in YAML.
type Duration time.Duration

func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: duration must be a string like \"10m\"", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (e.g. \"10m\", \"1s\")", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Env overrides, fixed by the contract.
var envOverrides = []struct {
	name string
	set  func(*Config, string)
}{
	{"WAITROOM_REDIS_URL", func(c *Config, v string) { c.Redis.URL = v }},
	{"WAITROOM_DATABASE_URL", func(c *Config, v string) { c.Postgres.URL = v }},
	{"WAITROOM_GATEWAY_ADDR", func(c *Config, v string) { c.Gateway.Addr = v }},
	{"WAITROOM_BOOKING_ADDR", func(c *Config, v string) { c.Booking.Addr = v }},
	{"WAITROOM_ADMITTER_ADDR", func(c *Config, v string) { c.Admitter.Addr = v }},
	{"WAITROOM_BOOKING_URL", func(c *Config, v string) { c.Gateway.BookingURL = v }},
	{"WAITROOM_TICKET_SECRET", func(c *Config, v string) { c.Auth.TicketSecret = v }},
	{"WAITROOM_SIGNING_KEY_FILE", func(c *Config, v string) { c.Auth.SigningKeyFile = v }},
	{"WAITROOM_ADMIN_TOKEN", func(c *Config, v string) { c.Auth.AdminToken = v }},
	{"WAITROOM_DRAW_SECRET", func(c *Config, v string) { c.Auth.DrawSecret = v }},
	{"WAITROOM_PAYMENT_SECRET", func(c *Config, v string) { c.Booking.Payment.Secret = v }},
}

// Path picks the config file: the flag value if given, else WAITROOM_CONFIG,
// else DefaultPath.
func Path(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := os.Getenv("WAITROOM_CONFIG"); v != "" {
		return v
	}
	return DefaultPath
}

// Load reads the file at path, applies the environment overrides, fills the
// defaults and validates. The error names every bad key.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(b, os.LookupEnv)
}

// Parse is Load without the file system; lookup reads the environment.
func Parse(b []byte, lookup func(string) (string, bool)) (*Config, error) {
	var c Config
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, &Error{Problems: []string{strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if err := checkTimes(&root); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, &Error{Problems: []string{strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if lookup != nil {
		for _, o := range envOverrides {
			if v, ok := lookup(o.name); ok && v != "" {
				o.set(&c, v)
			}
		}
	}
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// timeKeys hold RFC 3339 timestamps; yaml's own error for a bad one names
// neither the key nor the line, so they are checked first.
var timeKeys = map[string]bool{"prequeue_opens_at": true, "opens_at": true, "closes_at": true, "starts_at": true,
	"registration_opens_at": true, "registration_closes_at": true, "general_sale_at": true}

func checkTimes(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if timeKeys[k.Value] && v.Kind == yaml.ScalarNode && v.Tag != "!!null" && !(k.Value == "general_sale_at" && v.Value == "") {
				if _, err := time.Parse(time.RFC3339, v.Value); err != nil {
					return &Error{Problems: []string{fmt.Sprintf("line %d: %s: %q is not an RFC 3339 time (e.g. 2026-12-01T10:00:00Z)", v.Line, k.Value, v.Value)}}
				}
			}
		}
	}
	for _, c := range n.Content {
		if err := checkTimes(c); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) setDefaults() {
	def(&c.Redis.URL, "redis://127.0.0.1:6379/0")
	def(&c.Postgres.URL, "postgres://postgres@127.0.0.1:5432/waitroom?sslmode=disable")
	def(&c.Auth.SigningKeyFile, ".data/jwt-ed25519.pem")
	def(&c.Gateway.Addr, ":8080")
	def(&c.Gateway.BookingURL, "http://127.0.0.1:8081")
	defPtr(&c.Gateway.JoinsPerIPPerMinute, 30)
	defPtr(&c.Gateway.IPv6Prefix, 64)
	def(&c.Gateway.ProxyTimeout, Duration(10*time.Second))
	def(&c.Admitter.Addr, ":8082")
	def(&c.Admitter.Tick, Duration(time.Second))
	ad := &c.Admitter.Adaptive
	def(&ad.HoldP99, Duration(500*time.Millisecond))
	def(&ad.Interval, Duration(5*time.Second))
	def(&ad.ErrorShare, 0.05)
	def(&ad.Step, 0.1)
	def(&ad.Floor, 0.05)
	def(&c.Notify.From, "waitroom <noreply@example.com>")
	def(&c.Notify.PerAccountPerHour, 10)
	def(&c.Notify.Timeout, Duration(20*time.Second))
	def(&c.Booking.Addr, ":8081")
	if c.Booking.PublicKeyFile == "" {
		def(&c.Booking.JWKSURL, "http://127.0.0.1:8080/.well-known/jwks.json")
	}
	def(&c.Booking.HoldTTL, Duration(10*time.Minute))
	def(&c.Booking.MaxSeatsPerHold, 8)
	def(&c.Booking.HoldsPerMinute, 5)
	def(&c.Booking.HoldAttemptsPerMinute, 20)
	defPtr(&c.Booking.ReholdCooldown, c.Booking.HoldTTL)
	def(&c.Booking.Currency, "USD")
	def(&c.Booking.Payment.SessionTTL, Duration(8*time.Minute))
	def(&c.Booking.Payment.ReconcileAfter, Duration(15*time.Minute))
	def(&c.Booking.Payment.Simulator.Outcome, "succeed")
	def(&c.Booking.Payment.ReturnBaseURL, localURL(c.Gateway.Addr))
	if a := c.Booking.Payment.Simulator.Addr; a != "" {
		def(&c.Booking.Payment.Simulator.PageURL, localURL(a))
	}
	def(&c.Booking.Payment.Simulator.PageURL, localURL(c.Booking.Addr))
	c.Gateway.PublicURL = strings.TrimRight(c.Gateway.PublicURL, "/")
	c.Booking.Payment.ReturnBaseURL = strings.TrimRight(c.Booking.Payment.ReturnBaseURL, "/")
	c.Booking.Payment.Simulator.PageURL = strings.TrimRight(c.Booking.Payment.Simulator.PageURL, "/")
	for i := range c.Events {
		e := &c.Events[i]
		def(&e.Mode, ModeQueue)
		def(&e.Name, e.ID)
		a := &e.Admission
		def(&a.Capacity.BackendTPS, 1000)
		def(&a.Capacity.CallsPerUser, 3)
		def(&a.Capacity.RetryFactor, 2)
		def(&a.Capacity.SessionSeconds, 60)
		def(&a.AccessTTL, Duration(10*time.Minute))
		def(&a.AbandonAfter, Duration(60*time.Second))
		def(&a.AwayClaimWithin, Duration(10*time.Minute))
		def(&a.Session, SessionFixed)
	}
}

// def gives a key left out (its zero value) its default v.
func def[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// defPtr is def for a key whose zero is a value of its own (0 turns a
// limit off): only a key left out, nil, takes v.
func defPtr[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

var (
	eventIDPattern = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
	gaCodePattern  = regexp.MustCompile(`^[A-Z0-9-]{1,32}$`)
	// ISO 4217 codes are three capital letters.
	currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
)

// MaxShards bounds admission.shards: a waiting fan's poll counts on every
// shard, and more shards than Redis masters buy nothing.
const MaxShards = 64

// MaxRows is how many rows a showtime may have: rows are lettered A..Z.
const MaxRows = 26

// MaxJoinProofBits bounds admission.join_proof_bits (DESIGN.md: at most 28;
// 2^28 hashes are minutes of a phone's time).
const MaxJoinProofBits = 28

// MinSecretBytes is the shortest auth.ticket_secret and
// booking.payment.secret: HMAC-SHA256 keys, which a short one makes
// guessable offline from one signed ticket or callback.
const MinSecretBytes = 32

// MinAdminTokenBytes is the shortest auth.admin_token (when set).
const MinAdminTokenBytes = 24

// Error lists every problem found in a config.
type Error struct{ Problems []string }

func (e *Error) Error() string {
	return "config: " + strings.Join(e.Problems, "; ")
}

// Event returns the event with the given id.
func (c *Config) Event(id string) (*Event, bool) {
	for i := range c.Events {
		if c.Events[i].ID == id {
			return &c.Events[i], true
		}
	}
	return nil, false
}

// ParsePrefix reads a CIDR ("10.0.0.0/8") or a single address ("10.0.0.1",
// as a /32 or /128), as gateway.trusted_proxies takes them.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// localURL is how a browser on this machine reaches a listener at addr:
// http://localhost:port, or the host addr names.
// FansURL is how fans reach the gateway from outside a request (an
// email's link): gateway.public_url, else http://localhost (or
// gateway.addr's host) on gateway.addr's port.
func (c *Config) FansURL() string {
	if c.Gateway.PublicURL != "" {
		return c.Gateway.PublicURL
	}
	return localURL(c.Gateway.Addr)
}

func localURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// badBaseURL says what is wrong with a base URL fans' browsers are sent to
// ("" when nothing): absolute http(s), no query or fragment.
func badBaseURL(v string) string {
	u, err := url.Parse(v)
	switch {
	case v == "":
		return "must be set (an http(s) URL)"
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return "must be an absolute http(s) URL, e.g. https://tickets.example.com"
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "must have no query, fragment or user"
	}
	return ""
}

// loopbackHost: localhost or a loopback address (notify.LoopbackHost's
// rule, which config cannot import).
func loopbackHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "localhost" || (ip != nil && ip.IsLoopback())
}

// MaxPresaleSelected bounds presale.selected.
const MaxPresaleSelected = 10_000_000

// badSMTPURL says what is wrong with notify.smtp_url, or "". The URL may
// hold a password: the message never quotes it.
func badSMTPURL(v string) string {
	u, err := url.Parse(v)
	switch {
	case err != nil || u.Host == "" || u.Hostname() == "":
		return "must be smtp://[user:pass@]host[:port], smtps://… or smtp+insecure://… (empty = no email)"
	case u.Scheme != "smtp" && u.Scheme != "smtps" && u.Scheme != "smtp+insecure":
		return fmt.Sprintf("scheme %q is none of smtp (STARTTLS), smtps (TLS) or smtp+insecure (in clear)", u.Scheme)
	case u.Scheme == "smtp+insecure" && u.User != nil && !loopbackHost(u.Hostname()):
		return "smtp+insecure:// would send its password in clear off loopback: use smtp:// (STARTTLS) or smtps://"
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return "must have no path, query or fragment"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "has a bad port"
		}
	}
	return ""
}

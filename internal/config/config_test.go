package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/config"
)

// valid is a minimal good config; each bad row below edits one thing.
const valid = `
auth: {ticket_secret: "0123456789abcdef0123456789abcdef"}
booking:
  payment: {secret: "pay-secret-of-thirty-two-bytes-x"}
events:
  - id: "premiere"
    admission: {admit_per_second: 50, max_active: 500}
    showtimes:
      - {id: 42, title: "T", starts_at: "2026-12-01T19:00:00Z", rows: 10, seats_per_row: 20, price_cents: 1500}
  - id: "live"
    showtimes:
      - id: 43
        starts_at: "2026-12-02T20:00:00Z"
        rows: 5
        seats_per_row: 30
        general_admission: [{code: "FLOOR", capacity: 250, price_cents: 4500}]
`

func noEnv(string) (string, bool) { return "", false }

func TestValidConfigAndDefaults(t *testing.T) {
	c, err := config.Parse([]byte(valid), noEnv)
	if err != nil {
		t.Fatalf("Parse(valid): %v", err)
	}
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"redis.url", c.Redis.URL, "redis://127.0.0.1:6379/0"},
		{"gateway.addr", c.Gateway.Addr, ":8080"},
		{"gateway.joins_per_ip_per_minute", *c.Gateway.JoinsPerIPPerMinute, 30},
		{"admitter.tick", c.Admitter.Tick.D(), time.Second},
		{"booking.hold_ttl", c.Booking.HoldTTL.D(), 10 * time.Minute},
		{"booking.max_seats_per_hold", c.Booking.MaxSeatsPerHold, 8},
		{"booking.currency", c.Booking.Currency, "USD"},
		{"events[0].venue is optional", c.Events[0].Venue, ""},
		{"booking.payment.session_ttl", c.Booking.Payment.SessionTTL.D(), 8 * time.Minute},
		{"booking.payment.reconcile_after", c.Booking.Payment.ReconcileAfter.D(), 15 * time.Minute},
		{"booking.hold_attempts_per_minute", c.Booking.HoldAttemptsPerMinute, 20},
		{"booking.rehold_cooldown defaults to hold_ttl", c.Booking.ReholdCooldown.D(), 10 * time.Minute},
		{"gateway.trusted_proxies", len(c.Gateway.TrustedProxies), 0},
		{"gateway.ipv6_prefix", *c.Gateway.IPv6Prefix, 64},
		{"gateway.public_url", c.Gateway.PublicURL, ""},
		{"booking.payment.return_base_url from gateway.addr", c.Booking.Payment.ReturnBaseURL, "http://localhost:8080"},
		{"booking.payment.simulator.page_url from booking.addr", c.Booking.Payment.Simulator.PageURL, "http://localhost:8081"},
		{"booking.payment.simulator.auto_pay", c.Booking.Payment.Simulator.AutoPay, false},
		{"events[0].mode", c.Events[0].Mode, "queue"},
		{"events[0].name defaults to id", c.Events[0].Name, "premiere"},
		{"events[0].admission.access_ttl", c.Events[0].Admission.AccessTTL.D(), 10 * time.Minute},
		{"events[0].admission.abandon_after", c.Events[0].Admission.AbandonAfter.D(), 60 * time.Second},
		{"events[0].admission.session defaults to fixed", c.Events[0].Admission.Session, "fixed"},
		{"events[0].admission.join_proof_bits defaults to off", c.Events[0].Admission.JoinProofBits, 0},
		{"events[0] admit_per_second", *c.Events[0].Admission.AdmitPerSecond, 50.0},
		{"events[0] max_active", *c.Events[0].Admission.MaxActive, 500},
		// 1000 TPS / (3 calls × 2 retries) = 166.67/s, unrounded; × 60 s = 10,000.
		{"events[1] capacity model defaults", c.Events[1].Admission.Capacity, config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 60}},
		{"events[1] rate to compute", c.Events[1].Admission.AdmitPerSecond == nil && c.Events[1].Admission.MaxActive == nil, true},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v; want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	env := map[string]string{
		"WAITROOM_REDIS_URL":        "redis://10.0.0.1:6380/0",
		"WAITROOM_DATABASE_URL":     "postgres://x@db/w",
		"WAITROOM_GATEWAY_ADDR":     ":9090",
		"WAITROOM_BOOKING_ADDR":     ":9091",
		"WAITROOM_ADMITTER_ADDR":    ":9092",
		"WAITROOM_BOOKING_URL":      "http://booking:9091",
		"WAITROOM_TICKET_SECRET":    "another-ticket-secret-of-enough-length",
		"WAITROOM_SIGNING_KEY_FILE": "/keys/k.pem",
		"WAITROOM_ADMIN_TOKEN":      "another-admin-token-0123",
		"WAITROOM_PAYMENT_SECRET":   "another-payment-secret-of-enough-length",
	}
	c, err := config.Parse([]byte(valid), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{
		"WAITROOM_REDIS_URL": c.Redis.URL, "WAITROOM_DATABASE_URL": c.Postgres.URL,
		"WAITROOM_GATEWAY_ADDR": c.Gateway.Addr, "WAITROOM_BOOKING_ADDR": c.Booking.Addr,
		"WAITROOM_ADMITTER_ADDR": c.Admitter.Addr, "WAITROOM_BOOKING_URL": c.Gateway.BookingURL,
		"WAITROOM_TICKET_SECRET": c.Auth.TicketSecret, "WAITROOM_SIGNING_KEY_FILE": c.Auth.SigningKeyFile,
		"WAITROOM_ADMIN_TOKEN": c.Auth.AdminToken, "WAITROOM_PAYMENT_SECRET": c.Booking.Payment.Secret,
	}
	for k, want := range env {
		if got[k] != want {
			t.Errorf("%s: got %q; want %q", k, got[k], want)
		}
	}
}

// The config file is the flag's, else WAITROOM_CONFIG's, else the default.
func TestPath(t *testing.T) {
	for _, c := range []struct{ env, flag, want string }{
		{"", "", config.DefaultPath},
		{"/etc/w.yaml", "", "/etc/w.yaml"},
		{"/etc/w.yaml", "x.yaml", "x.yaml"},
	} {
		t.Setenv("WAITROOM_CONFIG", c.env)
		if got := config.Path(c.flag); got != c.want {
			t.Errorf("Path(%q) with WAITROOM_CONFIG=%q = %q; want %q", c.flag, c.env, got, c.want)
		}
	}
}

func TestBadConfigs(t *testing.T) {
	cases := []struct {
		name, old, new, want string
	}{
		{"zero rate", "admit_per_second: 50", "admit_per_second: 0", "events[0].admission.admit_per_second: must be > 0"},
		{"negative rate", "admit_per_second: 50", "admit_per_second: -1", "events[0].admission.admit_per_second: must be > 0"},
		{"zero cap", "max_active: 500", "max_active: 0", "events[0].admission.max_active: must be >= 1"},
		{"bad event id", `id: "premiere"`, `id: "Bad Id"`, `events[0].id "Bad Id": must match [a-z0-9-]{1,64}`},
		{"empty event id", `id: "premiere"`, `id: ""`, `events[0].id "": must match`},
		{"duplicate event id", `id: "live"`, `id: "premiere"`, `events[1].id: "premiere" duplicates events[0].id`},
		{"duplicate showtime id", "id: 43", "id: 42", "events[1].showtimes[0].id: 42 duplicates events[0].showtimes[0].id"},
		{"bad mode", `id: "premiere"`, "id: \"premiere\"\n    mode: \"open\"", `events[0].mode: must be queue, auto, passthrough, paused or closed, not "open"`},
		{"opens before prequeue", `id: "premiere"`, "id: \"premiere\"\n    prequeue_opens_at: \"2026-12-01T10:00:00Z\"\n    opens_at: \"2026-12-01T09:00:00Z\"", "events[0].opens_at: must not be before prequeue_opens_at"},
		{"prequeue without opens_at", `id: "premiere"`, "id: \"premiere\"\n    prequeue_opens_at: \"2026-12-01T10:00:00Z\"", "events[0].prequeue_opens_at: needs opens_at"},
		{"closes before opens", `id: "premiere"`, "id: \"premiere\"\n    opens_at: \"2026-12-01T10:00:00Z\"\n    closes_at: \"2026-12-01T09:00:00Z\"", "events[0].closes_at: must be after opens_at"},
		{"bad timestamp", `id: "premiere"`, "id: \"premiere\"\n    opens_at: \"tomorrow\"", "opens_at"},
		{"session ttl not shorter than hold", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, "hold_ttl: \"5m\"\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\", session_ttl: \"5m\"}", "booking.payment.session_ttl: must be shorter than booking.hold_ttl"},
		{"unknown top-level key", "booking:", "bookng: {}\nbooking:", "field bookng not found"},
		{"unknown nested key (typo)", "admit_per_second: 50", "admit_per_secnd: 50", "field admit_per_secnd not found"},
		{"bad duration", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, "hold_ttl: \"ten minutes\"\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\"}", `"ten minutes" is not a duration`},
		{"zero hold attempts", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, "hold_attempts_per_minute: -1\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\"}", "booking.hold_attempts_per_minute: must be >= 1"},
		{"negative rehold cooldown", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, "rehold_cooldown: \"-1s\"\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\"}", "booking.rehold_cooldown: must be >= 0"},
		{"bad trusted proxy", "booking:", "gateway: {trusted_proxies: [\"10.0.0.0/8\", \"not-an-ip\"]}\nbooking:", `gateway.trusted_proxies[1]: "not-an-ip" is not a CIDR or an IP address`},
		{"tiny hold ttl", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, "hold_ttl: \"100ms\"\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\", session_ttl: \"50ms\"}", "booking.hold_ttl: must be >= 1s"},
		{"missing ticket secret", `auth: {ticket_secret: "0123456789abcdef0123456789abcdef"}`, "", "auth.ticket_secret: must be set"},
		{"bad currency", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, "currency: \"usd\"\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\"}", `booking.currency: "usd" must be an ISO 4217 code`},
		{"missing payment secret", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, `payment: {}`, "booking.payment.secret: must be set"},
		{"bad simulator outcome", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, `payment: {secret: "pay-secret-of-thirty-two-bytes-x", simulator: {outcome: "maybe"}}`, `booking.payment.simulator.outcome: must be succeed or fail, not "maybe"`},
		{"relative return url", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, `payment: {secret: "pay-secret-of-thirty-two-bytes-x", return_base_url: "/e"}`, `booking.payment.return_base_url: "/e" must be an absolute http(s) URL`},
		{"simulator on the booking port", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, `payment: {secret: "pay-secret-of-thirty-two-bytes-x", simulator: {addr: ":8081"}}`, `booking.payment.simulator.addr: ":8081" is booking.addr already`},
		{"page url with a query", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, `payment: {secret: "pay-secret-of-thirty-two-bytes-x", simulator: {page_url: "http://pay.test/?x=1"}}`, `booking.payment.simulator.page_url: "http://pay.test/?x=1" must have no query`},
		{"zero max seats", `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`, "max_seats_per_hold: -1\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\"}", "booking.max_seats_per_hold: must be between 1 and 100"},
		{"ipv6 prefix zero", "booking:", "gateway: {ipv6_prefix: 0}\nbooking:", "gateway.ipv6_prefix: must be between 1 and 128, not 0"},
		{"ipv6 prefix past the address", "booking:", "gateway: {ipv6_prefix: 129}\nbooking:", "gateway.ipv6_prefix: must be between 1 and 128, not 129"},
		{"relative public url", "booking:", "gateway: {public_url: \"/e\"}\nbooking:", `gateway.public_url: "/e" must be an absolute http(s) URL`},
		{"public url without a scheme", "booking:", "gateway: {public_url: \"tickets.example.com\"}\nbooking:", `gateway.public_url: "tickets.example.com" must be an absolute http(s) URL`},
		{"public url not http", "booking:", "gateway: {public_url: \"ftp://tickets.example.com\"}\nbooking:", `gateway.public_url: "ftp://tickets.example.com" must be an absolute http(s) URL`},
		{"public url with a query", "booking:", "gateway: {public_url: \"https://tickets.example.com/?a=1\"}\nbooking:", `gateway.public_url: "https://tickets.example.com/?a=1" must have no query`},
		{"public url with a fragment", "booking:", "gateway: {public_url: \"https://tickets.example.com/#x\"}\nbooking:", `gateway.public_url: "https://tickets.example.com/#x" must have no query, fragment`},
		{"negative per-ip limit", "booking:", "gateway: {joins_per_ip_per_minute: -1}\nbooking:", "gateway.joins_per_ip_per_minute: must be >= 0"},
		{"tiny tick", "booking:", "admitter: {tick: \"1ms\"}\nbooking:", "admitter.tick: must be >= 10ms"},
		{"adaptive share above one", "booking:", "admitter: {adaptive: {error_share: 1.5}}\nbooking:", "admitter.adaptive.error_share: must be between 0 and 1"},
		{"adaptive negative step", "booking:", "admitter: {adaptive: {step: -0.1}}\nbooking:", "admitter.adaptive.step: must be > 0 and <= 1"},
		{"adaptive tiny p99", "booking:", "admitter: {adaptive: {hold_p99: \"10us\"}}\nbooking:", "admitter.adaptive.hold_p99: must be >= 1ms"},
		{"adaptive floor above one", "booking:", "admitter: {adaptive: {floor: 2}}\nbooking:", "admitter.adaptive.floor: must be > 0 and <= 1"},
		{"adaptive tiny interval", "booking:", "admitter: {adaptive: {interval: \"1ms\"}}\nbooking:", "admitter.adaptive.interval: must be >= 10ms"},
		{"adaptive not a bool", "admit_per_second: 50", "admit_per_second: 50, adaptive: sometimes", "into bool"},
		{"showtime id zero", "id: 42", "id: 0", "events[0].showtimes[0].id: must be >= 1"},
		{"too many rows", "rows: 10", "rows: 27", "events[0].showtimes[0].rows: must be between 0 and 26"},
		{"rows without seats", "seats_per_row: 20", "seats_per_row: 0", "events[0].showtimes[0].rows: rows and seats_per_row must both be set or both be 0"},
		{"negative price", "price_cents: 1500", "price_cents: -5", "events[0].showtimes[0].price_cents: must be >= 0"},
		{"bad GA code", `code: "FLOOR"`, `code: "floor area"`, `events[1].showtimes[0].general_admission[0].code: "floor area" must match`},
		{"GA capacity zero", "capacity: 250", "capacity: 0", "events[1].showtimes[0].general_admission[0].capacity: must be >= 1"},
		{"retry factor below one", "admit_per_second: 50", "admit_per_second: 50, capacity: {retry_factor: 0.5}", "events[0].admission.capacity.retry_factor: must be >= 1"},
		{"access ttl too short", "admit_per_second: 50", "admit_per_second: 50, access_ttl: \"10ms\"", "events[0].admission.access_ttl: must be >= 1s"},
		{"abandon_after too short", "admit_per_second: 50", "admit_per_second: 50, abandon_after: \"10ms\"", "events[0].admission.abandon_after: must be >= 1s"},
		{"proof too hard", "admit_per_second: 50", "admit_per_second: 50, join_proof_bits: 29", "events[0].admission.join_proof_bits: must be between 0 (off) and 28, not 29"},
		{"negative proof", "admit_per_second: 50", "admit_per_second: 50, join_proof_bits: -1", "events[0].admission.join_proof_bits: must be between 0 (off) and 28, not -1"},
		{"accounts required without keys", "admit_per_second: 50", "admit_per_second: 50, accounts: required", "events[0].admission.accounts: required needs auth.account_keys_file"},
		{"accounts unknown", "admit_per_second: 50", "admit_per_second: 50, accounts: always", `events[0].admission.accounts: must be optional or required, not "always"`},
		{"session unknown", "admit_per_second: 50", "admit_per_second: 50, session: rolling", `events[0].admission.session: must be fixed or sliding, not "rolling"`},
		{"page dir with spaces around", `id: "premiere"`, "id: \"premiere\"\n    page: {dir: \" pages/shop\"}", `events[0].page.dir: " pages/shop" must be a folder's path`},
		{"page dir a pattern", `id: "premiere"`, "id: \"premiere\"\n    page: {dir: \"pages/*\"}", `events[0].page.dir: "pages/*" must be one folder`},
		{"page key unknown", `id: "premiere"`, "id: \"premiere\"\n    page: {folder: \"pages\"}", "field folder not found"},
		{"not yaml", "events:", "events: [", "config:"},
		{"string for number", "max_active: 500", "max_active: lots", "cannot unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(valid, tc.old) {
				t.Fatalf("bad row: %q not in the valid config", tc.old)
			}
			src := strings.Replace(valid, tc.old, tc.new, 1)
			_, err := config.Parse([]byte(src), noEnv)
			if err == nil {
				t.Fatalf("Parse accepted the config; want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %q; want it to contain %q", err, tc.want)
			}
		})
	}
}

// Secrets have a floor: a ticket or payment secret shorter than 32 bytes,
// or an operators' token shorter than 24, stops the process at start, named
// by its key, whether it came from the file or from the environment.
func TestSecretsHaveAFloor(t *testing.T) {
	const (
		ticket  = `ticket_secret: "0123456789abcdef0123456789abcdef"`
		payment = `secret: "pay-secret-of-thirty-two-bytes-x"`
	)
	tests := []struct {
		name     string
		old, new string            // an edit of the valid config
		env      map[string]string // overrides
		want     string            // "" = accepted
	}{
		{"ticket secret of 31 bytes", ticket, `ticket_secret: "0123456789abcdef0123456789abcde"`, nil, "auth.ticket_secret: must be at least 32 bytes"},
		{"ticket secret of 32 bytes", ticket, ticket, nil, ""},
		{"ticket secret of 31 bytes in 11 characters", ticket, `ticket_secret: "ひらがなカタカナ漢字x"`, nil, "auth.ticket_secret: must be at least 32 bytes"},
		{"ticket secret of 33 bytes in 11 characters", ticket, `ticket_secret: "ひらがなカタカナ漢字で"`, nil, ""},
		{"payment secret of 31 bytes", payment, `secret: "pay-secret-of-thirty-two-bytes"`, nil, "booking.payment.secret: must be at least 32 bytes"},
		{"payment secret of 32 bytes", payment, payment, nil, ""},
		{"admin token of 23 bytes", ticket, ticket + `, admin_token: "operator-token-01234567"`, nil, "auth.admin_token: must be at least 24 bytes"},
		{"admin token of 24 bytes", ticket, ticket + `, admin_token: "operator-token-012345678"`, nil, ""},
		{"no admin token", ticket, ticket + `, admin_token: ""`, nil, ""},
		{"short WAITROOM_TICKET_SECRET", "", "", map[string]string{"WAITROOM_TICKET_SECRET": "sixteen-bytes-ok"}, "auth.ticket_secret: must be at least 32 bytes"},
		{"short WAITROOM_PAYMENT_SECRET", "", "", map[string]string{"WAITROOM_PAYMENT_SECRET": "pay"}, "booking.payment.secret: must be at least 32 bytes"},
		{"short WAITROOM_ADMIN_TOKEN", "", "", map[string]string{"WAITROOM_ADMIN_TOKEN": "admin"}, "auth.admin_token: must be at least 24 bytes"},
		{"long enough from the environment", "", "", map[string]string{
			"WAITROOM_TICKET_SECRET": strings.Repeat("t", 32), "WAITROOM_PAYMENT_SECRET": strings.Repeat("p", 32), "WAITROOM_ADMIN_TOKEN": strings.Repeat("a", 24),
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(valid, tt.old) {
				t.Fatalf("bad row: %q not in the valid config", tt.old)
			}
			src := strings.Replace(valid, tt.old, tt.new, 1)
			_, err := config.Parse([]byte(src), func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Parse: %v; want it accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Parse: %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestEveryProblemReportedAtOnce(t *testing.T) {
	src := strings.Replace(valid, "admit_per_second: 50", "admit_per_second: 0", 1)
	src = strings.Replace(src, `id: "live"`, `id: "Live!"`, 1)
	_, err := config.Parse([]byte(src), noEnv)
	if err == nil || !strings.Contains(err.Error(), "admit_per_second") || !strings.Contains(err.Error(), `"Live!"`) {
		t.Fatalf("error = %v; want both problems named", err)
	}
}

func TestShippedConfigsLoad(t *testing.T) {
	matches, _ := filepath.Glob("../../configs/waitroom*.yaml")
	if len(matches) == 0 {
		t.Fatal("no configs/waitroom*.yaml found")
	}
	for _, m := range matches {
		if _, err := config.Load(m); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	if _, err := config.Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("Load(missing) = %v; want a not-exist error", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestFairPlayKeys(t *testing.T) {
	c, err := config.Parse([]byte(strings.Replace(valid, `payment: {secret: "pay-secret-of-thirty-two-bytes-x"}`,
		"rehold_cooldown: \"0s\"\n  hold_attempts_per_minute: 7\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\"}", 1)+
		"gateway: {trusted_proxies: [\"10.0.0.0/8\", \"192.168.1.7\", \"fd00::/8\"]}\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Booking.ReholdCooldown.D(); got != 0 {
		t.Errorf("rehold_cooldown \"0s\" = %v; want 0 (off), not the hold_ttl default", got)
	}
	if c.Booking.HoldAttemptsPerMinute != 7 {
		t.Errorf("hold_attempts_per_minute = %d; want 7", c.Booking.HoldAttemptsPerMinute)
	}
	for _, bits := range []int{1, 48, 128} {
		c, err := config.Parse([]byte(valid+"gateway: {ipv6_prefix: "+strconv.Itoa(bits)+"}\n"), noEnv)
		if err != nil || *c.Gateway.IPv6Prefix != bits {
			t.Errorf("ipv6_prefix: %d: %v; want it taken", bits, err)
		}
	}
	for _, p := range []struct{ in, want string }{
		{"10.0.0.0/8", "10.0.0.0/8"}, {"10.1.2.3/8", "10.0.0.0/8"}, {"192.168.1.7", "192.168.1.7/32"},
		{"::ffff:192.168.1.7", "192.168.1.7/32"}, {"fd00::/8", "fd00::/8"},
	} {
		got, err := config.ParsePrefix(p.in)
		if err != nil || got.String() != p.want {
			t.Errorf("ParsePrefix(%q) = %v, %v; want %s", p.in, got, err, p.want)
		}
	}
}

// The hosted payment page and the return to the gateway follow the
// listeners' addresses unless set; a trailing slash is dropped.
func TestPaymentURLs(t *testing.T) {
	tests := []struct {
		name, yaml, wantReturn, wantPage string
	}{
		{"hosts named", "gateway: {addr: \"127.0.0.1:9000\"}\nbooking:\n  addr: \"127.0.0.1:9001\"", "http://127.0.0.1:9000", "http://127.0.0.1:9001"},
		{"a listener of its own", "booking:\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\", simulator: {addr: \":8083\"}}\n  currency: \"USD\"", "http://localhost:8080", "http://localhost:8083"},
		{"set", "booking:\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\", return_base_url: \"https://tickets.example.com/\", simulator: {page_url: \"https://pay.example.com\"}}\n  currency: \"USD\"", "https://tickets.example.com", "https://pay.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(valid, "booking:\n  payment: {secret: \"pay-secret-of-thirty-two-bytes-x\"}", tt.yaml, 1)
			if !strings.Contains(tt.yaml, "payment:") {
				src = strings.Replace(valid, "booking:", tt.yaml, 1)
			}
			c, err := config.Parse([]byte(src), noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Booking.Payment.ReturnBaseURL; got != tt.wantReturn {
				t.Errorf("return_base_url = %q; want %q", got, tt.wantReturn)
			}
			if got := c.Booking.Payment.Simulator.PageURL; got != tt.wantPage {
				t.Errorf("page_url = %q; want %q", got, tt.wantPage)
			}
		})
	}
}

// gateway.public_url keeps its path, without a trailing slash.
func TestPublicURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://tickets.example.com", "https://tickets.example.com"},
		{"https://tickets.example.com/", "https://tickets.example.com"},
		{"http://127.0.0.1:8080/room//", "http://127.0.0.1:8080/room"},
	} {
		c, err := config.Parse([]byte(valid+"gateway: {public_url: \""+tt.in+"\"}\n"), noEnv)
		if err != nil {
			t.Fatalf("public_url %q: %v", tt.in, err)
		}
		if c.Gateway.PublicURL != tt.want {
			t.Errorf("public_url %q read as %q; want %q", tt.in, c.Gateway.PublicURL, tt.want)
		}
	}
}

func TestJoinProofBits(t *testing.T) {
	for _, bits := range []int{0, 1, 16, 28} {
		src := strings.Replace(valid, "admit_per_second: 50", "admit_per_second: 50, join_proof_bits: "+strconv.Itoa(bits), 1)
		c, err := config.Parse([]byte(src), noEnv)
		if err != nil {
			t.Fatalf("join_proof_bits: %d refused: %v", bits, err)
		}
		if got := c.Events[0].Admission.JoinProofBits; got != bits {
			t.Errorf("join_proof_bits: %d read as %d", bits, got)
		}
	}
}

func TestAdaptiveDefaults(t *testing.T) {
	c, err := config.Parse([]byte(strings.Replace(valid, "admit_per_second: 50", "admit_per_second: 50, adaptive: true", 1)), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Events[0].Admission.Adaptive || c.Events[1].Admission.Adaptive {
		t.Errorf("adaptive = %v, %v; want true, false", c.Events[0].Admission.Adaptive, c.Events[1].Admission.Adaptive)
	}
	ad := c.Admitter.Adaptive
	want := config.Adaptive{HoldP99: config.Duration(500 * time.Millisecond), ErrorShare: 0.05, Step: 0.1, Interval: config.Duration(5 * time.Second), Floor: 0.05}
	if ad != want {
		t.Errorf("admitter.adaptive = %+v; want %+v", ad, want)
	}
}

// A draw's seed is keyed by auth.draw_secret (DESIGN.md, Fair play, third
// round): a config with a pre-queue or a presale and no draw secret, or one
// shorter than 32 bytes, stops the process at start, named by its key,
// from the file or the environment; a config with neither needs none.
func TestDrawSecretForADraw(t *testing.T) {
	const (
		ticket   = `auth: {ticket_secret: "0123456789abcdef0123456789abcdef"}`
		live     = `  - id: "live"`
		prequeue = `  - id: "live"
    prequeue_opens_at: "2026-12-01T09:00:00Z"
    opens_at: "2026-12-01T10:00:00Z"`
		presale = `  - id: "live"
    opens_at: "2026-12-01T10:00:00Z"
    presale: {registration_opens_at: "2026-11-20T00:00:00Z", registration_closes_at: "2026-11-27T00:00:00Z", selected: 10, group_size: 5, window: "30m"}`
		drawSecret = `, draw_secret: "draw-secret-of-thirty-two-bytes!"`
		keys       = `, account_keys_file: "keys.pem"`
	)
	tests := []struct {
		name       string
		auth, live string
		env        map[string]string
		want       string // "" = accepted
	}{
		{"no draw, no secret", ticket, live, nil, ""},
		{"a pre-queue, no secret", ticket, prequeue, nil, `auth.draw_secret: must be set (or WAITROOM_DRAW_SECRET): events[1] ("live") has a pre-queue`},
		{"a presale, no secret", strings.Replace(ticket, "}", keys+"}", 1), presale, nil, `auth.draw_secret: must be set (or WAITROOM_DRAW_SECRET): events[1] ("live") has a presale`},
		{"a pre-queue, a secret", strings.Replace(ticket, "}", drawSecret+"}", 1), prequeue, nil, ""},
		{"a presale, a secret", strings.Replace(ticket, "}", keys+drawSecret+"}", 1), presale, nil, ""},
		{"a pre-queue, the secret from the environment", ticket, prequeue, map[string]string{"WAITROOM_DRAW_SECRET": strings.Repeat("d", 32)}, ""},
		{"a secret of 31 bytes", strings.Replace(ticket, "}", `, draw_secret: "draw-secret-of-thirty-one-bytes"}`, 1), live, nil, "auth.draw_secret: must be at least 32 bytes, not 31"},
		{"a short WAITROOM_DRAW_SECRET", ticket, prequeue, map[string]string{"WAITROOM_DRAW_SECRET": "short"}, "auth.draw_secret: must be at least 32 bytes, not 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(strings.Replace(valid, ticket, tt.auth, 1), live, tt.live, 1)
			c, err := config.Parse([]byte(src), func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Parse: %v; want it accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Parse: %v; want an error containing %q", err, tt.want)
			case tt.want == "" && tt.env["WAITROOM_DRAW_SECRET"] != "" && c.Auth.DrawSecret != tt.env["WAITROOM_DRAW_SECRET"]:
				t.Fatalf("auth.draw_secret %q; want the environment's", c.Auth.DrawSecret)
			}
		})
	}
}

// notify.smtp_url (DESIGN.md, Mail goes over TLS): the three schemes load,
// any other is named; smtp+insecure:// with a password is refused off
// loopback (it would cross the network in clear); the message never
// quotes a password.
func TestSMTPURLs(t *testing.T) {
	load := func(u string) error {
		src := strings.Replace(valid, "booking:", fmt.Sprintf("notify: {smtp_url: %q}\nbooking:", u), 1)
		_, err := config.Parse([]byte(src), noEnv)
		return err
	}
	for _, u := range []string{"smtp://mail.example.com:587", "smtp://user:pw@mail.example.com", "smtps://user:pw@mail.example.com",
		"smtp+insecure://relay.internal:25", "smtp+insecure://user:pw@127.0.0.1:2525", "smtp+insecure://user:pw@localhost", "smtp://127.0.0.1:2525"} {
		if err := load(u); err != nil {
			t.Errorf("%s: %v; want accepted", u, err)
		}
	}
	for u, want := range map[string]string{
		"http://mail.example.com":                  `notify.smtp_url: scheme "http" is none of smtp (STARTTLS), smtps (TLS) or smtp+insecure (in clear)`,
		"smtp+tls://user:pw-1@mail.example.com":    `notify.smtp_url: scheme "smtp+tls" is none of`,
		"smtp+insecure://user:pw-1@relay.internal": "notify.smtp_url: smtp+insecure:// would send its password in clear off loopback",
		"smtp://":                   "notify.smtp_url: must be smtp://",
		"smtp://mail.example.com/x": "notify.smtp_url: must have no path",
	} {
		err := load(u)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", u, err, want)
		} else if strings.Contains(err.Error(), "pw-1") {
			t.Errorf("%s: the error quotes the password: %v", u, err)
		}
	}
}

// admission.session takes fixed and sliding.
func TestSessionModes(t *testing.T) {
	for _, mode := range []string{"fixed", "sliding"} {
		src := strings.Replace(valid, "admit_per_second: 50", "admit_per_second: 50, session: "+mode, 1)
		c, err := config.Parse([]byte(src), noEnv)
		if err != nil {
			t.Fatalf("session %s: %v", mode, err)
		}
		if got := c.Events[0].Admission.Sliding(); got != (mode == "sliding") {
			t.Errorf("session %s: Sliding() = %v", mode, got)
		}
	}
}

package config

import (
	"fmt"
	"net"
	"net/mail"
	"strings"
	"time"
)

// Validate reports every problem of c at once, each as "key: problem".
//
// Each section checks its own keys in its validate method, in the order
// of the file; a rule that spans sections is the section's whose key it
// names, handed what it reads of the others (events[].admission.accounts
// needs auth.account_keys_file: Admission.validate is told whether it is
// set). A new key is checked in its section's method, never here: an auth
// key in Auth.validate, an event's own (its mode, times, pages) in
// Event.validate, its admission's in Admission.validate, and so on.
func (c *Config) Validate() error {
	var v problems
	c.Redis.validate(&v)
	c.Auth.validate(&v, c.Events)
	c.Gateway.validate(&v)
	c.Admitter.validate(&v)
	c.Notify.validate(&v)
	c.Booking.validate(&v)
	validateEvents(&v, c)
	validateWebhooks(&v, c.Webhooks)
	if len(v) > 0 {
		return &Error{Problems: v}
	}
	return nil
}

// problems gathers what Validate finds, so that every problem of a file is
// reported at once.
type problems []string

// add notes a problem of key.
func (v *problems) add(key, format string, args ...any) {
	*v = append(*v, key+": "+fmt.Sprintf(format, args...))
}

func (r Redis) validate(v *problems) {
	if r.WaitReplicas < 0 || r.WaitReplicas > 5 {
		v.add("redis.wait_replicas", "must be between 0 (off) and 5, not %d", r.WaitReplicas)
	}
}

// validate checks the auth section; events are the config's, which
// auth.draw_secret and auth.tokens are checked against. The secrets are
// checked by length only, and never written out.
func (a *Auth) validate(v *problems, events []Event) {
	if n := len(a.TicketSecret); n == 0 {
		v.add("auth.ticket_secret", "must be set (or WAITROOM_TICKET_SECRET)")
	} else if n < MinSecretBytes {
		v.add("auth.ticket_secret", "must be at least %d bytes, not %d (in the file or WAITROOM_TICKET_SECRET)", MinSecretBytes, n)
	}
	a.validateDrawSecret(v, events)
	if n := len(a.AdminToken); n > 0 && n < MinAdminTokenBytes {
		v.add("auth.admin_token", "must be at least %d bytes, not %d (in the file or WAITROOM_ADMIN_TOKEN), or empty to turn the operators' API off", MinAdminTokenBytes, n)
	}
	a.validateTokens(v, eventIDs(events))
}

// validateDrawSecret: auth.draw_secret keys every draw's seed, so a config
// with a draw (a pre-queue's lottery, a presale's selection) needs it, and
// like the other HMAC keys it has a floor.
func (a *Auth) validateDrawSecret(v *problems, events []Event) {
	if n := len(a.DrawSecret); n > 0 {
		if n < MinSecretBytes {
			v.add("auth.draw_secret", "must be at least %d bytes, not %d (in the file or WAITROOM_DRAW_SECRET)", MinSecretBytes, n)
		}
		return
	}
	for i, e := range events {
		what := ""
		switch {
		case e.PrequeueOpensAt != nil:
			what = "a pre-queue"
		case e.Presale != nil:
			what = "a presale"
		default:
			continue
		}
		v.add("auth.draw_secret", "must be set (or WAITROOM_DRAW_SECRET): events[%d] (%q) has %s, whose draw's seed it keys", i, e.ID, what)
		return
	}
}

func (g Gateway) validate(v *problems) {
	if *g.JoinsPerIPPerMinute < 0 {
		v.add("gateway.joins_per_ip_per_minute", "must be >= 0")
	}
	if p := *g.IPv6Prefix; p < 1 || p > 128 {
		v.add("gateway.ipv6_prefix", "must be between 1 and 128, not %d", p)
	}
	if u := g.PublicURL; u != "" {
		if msg := badBaseURL(u); msg != "" {
			v.add("gateway.public_url", "%q %s", u, msg)
		}
	}
	if g.ProxyTimeout < 0 {
		v.add("gateway.proxy_timeout", "must be > 0")
	}
	for i, p := range g.TrustedProxies {
		if _, err := ParsePrefix(p); err != nil {
			v.add(fmt.Sprintf("gateway.trusted_proxies[%d]", i), "%q is not a CIDR or an IP address", p)
		}
	}
}

func (a Admitter) validate(v *problems) {
	if a.Tick.D() < 10*time.Millisecond {
		v.add("admitter.tick", "must be >= 10ms")
	}
	a.Adaptive.validate(v)
}

func (ad Adaptive) validate(v *problems) {
	if ad.HoldP99.D() < time.Millisecond {
		v.add("admitter.adaptive.hold_p99", "must be >= 1ms")
	}
	if !(ad.ErrorShare > 0 && ad.ErrorShare < 1) {
		v.add("admitter.adaptive.error_share", "must be between 0 and 1 (a share of the answers), not %g", ad.ErrorShare)
	}
	if !(ad.Step > 0 && ad.Step <= 1) {
		v.add("admitter.adaptive.step", "must be > 0 and <= 1 (a share of the configured rate), not %g", ad.Step)
	}
	if ad.Interval.D() < 10*time.Millisecond {
		v.add("admitter.adaptive.interval", "must be >= 10ms")
	}
	if !(ad.Floor > 0 && ad.Floor <= 1) {
		v.add("admitter.adaptive.floor", "must be > 0 and <= 1 (a share of the configured rate), not %g", ad.Floor)
	}
}

func (n Notify) validate(v *problems) {
	if u := n.SMTPURL; u != "" {
		if msg := badSMTPURL(u); msg != "" {
			v.add("notify.smtp_url", "%s", msg)
		}
	}
	if _, err := mail.ParseAddress(n.From); err != nil {
		v.add("notify.from", "%q is not an address such as \"waitroom <noreply@example.com>\"", n.From)
	}
	if n.Timeout.D() < 100*time.Millisecond {
		v.add("notify.timeout", "must be >= 100ms")
	}
	if n.PerAccountPerHour < 1 {
		v.add("notify.per_account_per_hour", "must be >= 1, not %d", n.PerAccountPerHour)
	}
}

func (b Booking) validate(v *problems) {
	if b.HoldTTL.D() < time.Second {
		v.add("booking.hold_ttl", "must be >= 1s")
	}
	if b.MaxSeatsPerHold < 1 || b.MaxSeatsPerHold > 100 {
		v.add("booking.max_seats_per_hold", "must be between 1 and 100")
	}
	if b.HoldsPerMinute < 1 {
		v.add("booking.holds_per_minute", "must be >= 1")
	}
	if b.HoldAttemptsPerMinute < 1 {
		v.add("booking.hold_attempts_per_minute", "must be >= 1")
	}
	if *b.ReholdCooldown < 0 {
		v.add("booking.rehold_cooldown", "must be >= 0 (0 = off)")
	}
	if !currencyPattern.MatchString(b.Currency) {
		v.add("booking.currency", "%q must be an ISO 4217 code such as USD, EUR or JPY", b.Currency)
	}
	b.Payment.validate(v, b)
}

// validate checks booking.payment; b is the booking section it is in (its
// sessions end before a hold does, its page is not on booking.addr).
func (p Payment) validate(v *problems, b Booking) {
	if n := len(p.Secret); n == 0 {
		v.add("booking.payment.secret", "must be set (or WAITROOM_PAYMENT_SECRET)")
	} else if n < MinSecretBytes {
		v.add("booking.payment.secret", "must be at least %d bytes, not %d (in the file or WAITROOM_PAYMENT_SECRET)", MinSecretBytes, n)
	}
	if p.SessionTTL.D() <= 0 {
		v.add("booking.payment.session_ttl", "must be > 0")
	} else if p.SessionTTL >= b.HoldTTL {
		v.add("booking.payment.session_ttl", "must be shorter than booking.hold_ttl (%s >= %s)", p.SessionTTL, b.HoldTTL)
	}
	if p.ReconcileAfter.D() <= 0 {
		v.add("booking.payment.reconcile_after", "must be > 0")
	}
	if msg := badBaseURL(p.ReturnBaseURL); msg != "" {
		v.add("booking.payment.return_base_url", "%q %s", p.ReturnBaseURL, msg)
	}
	p.Simulator.validate(v, b.Addr)
}

// validate checks booking.payment.simulator; bookingAddr is booking.addr,
// which its own listener must not take again.
func (s Simulator) validate(v *problems, bookingAddr string) {
	if s.Outcome != "succeed" && s.Outcome != "fail" {
		v.add("booking.payment.simulator.outcome", "must be succeed or fail, not %q", s.Outcome)
	}
	if s.Delay < 0 {
		v.add("booking.payment.simulator.delay", "must be >= 0")
	}
	if a := s.Addr; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			v.add("booking.payment.simulator.addr", "%q must be host:port or :port", a)
		} else if a == bookingAddr {
			v.add("booking.payment.simulator.addr", "%q is booking.addr already (leave it empty to serve the page there)", a)
		}
	}
	if msg := badBaseURL(s.PageURL); msg != "" {
		v.add("booking.payment.simulator.page_url", "%q %s", s.PageURL, msg)
	}
}

// eventsSeen is what the events so far hold that another may not hold
// again: each id, showtime id and protect rule belongs to one event.
type eventsSeen struct {
	ids       map[string]int
	showtimes map[int64]string
	guarded   map[Protect]string // each rule (lower-cased) with its key, to name a duplicate
}

// validateEvents checks every event, each against the ones before it.
func validateEvents(v *problems, c *Config) {
	seen := eventsSeen{ids: map[string]int{}, showtimes: map[int64]string{}, guarded: map[Protect]string{}}
	for i := range c.Events {
		c.Events[i].validate(v, i, c, &seen)
	}
}

// eventIDs are the events' good ids, each with the first event that has it
// (what auth.tokens[].events may name).
func eventIDs(events []Event) map[string]int {
	ids := map[string]int{}
	for i, e := range events {
		if _, dup := ids[e.ID]; !dup && eventIDPattern.MatchString(e.ID) {
			ids[e.ID] = i
		}
	}
	return ids
}

// validate checks events[i]; c is the whole config, whose other sections
// some of the event's keys need (auth.account_keys_file for accounts and a
// presale, the gateway's public URL and proxies for protect).
func (e Event) validate(v *problems, i int, c *Config, seen *eventsSeen) {
	k := fmt.Sprintf("events[%d]", i)
	if !eventIDPattern.MatchString(e.ID) {
		v.add(fmt.Sprintf("%s.id %q", k, e.ID), "must match [a-z0-9-]{1,64}")
	} else if j, dup := seen.ids[e.ID]; dup {
		v.add(k+".id", "%q duplicates events[%d].id", e.ID, j)
	} else {
		seen.ids[e.ID] = i
	}
	switch e.Mode {
	case ModeQueue, ModeAuto, ModePassthrough, ModePaused, ModeClosed:
	default:
		v.add(k+".mode", "must be queue, auto, passthrough, paused or closed, not %q", e.Mode)
	}
	if e.PrequeueOpensAt != nil && e.OpensAt == nil {
		v.add(k+".prequeue_opens_at", "needs opens_at")
	}
	if e.PrequeueOpensAt != nil && e.OpensAt != nil && e.OpensAt.Before(*e.PrequeueOpensAt) {
		v.add(k+".opens_at", "must not be before prequeue_opens_at")
	}
	if e.ClosesAt != nil && e.OpensAt != nil && !e.ClosesAt.After(*e.OpensAt) {
		v.add(k+".closes_at", "must be after opens_at")
	}
	accountKeys := c.Auth.AccountKeysFile != ""
	e.Admission.validate(v, k+".admission", accountKeys)
	validateProtect(v, k, e.Protect, c.Gateway, seen.guarded)
	e.Bypass.validate(v, k+".bypass", len(e.Protect) > 0)
	if e.Presale != nil {
		e.Presale.validate(v, k+".presale", e, accountKeys)
	}
	for j, s := range e.Showtimes {
		s.validate(v, fmt.Sprintf("%s.showtimes[%d]", k, j), seen.showtimes)
	}
	e.Page.validate(v, k+".page")
}

// validate checks the page folder's key at k (k ends in ".page"): its
// form only (see Page).
func (p Page) validate(v *problems, k string) {
	switch d := p.Dir; {
	case d == "":
	case strings.TrimSpace(d) != d || strings.ContainsAny(d, "\x00\r\n"):
		v.add(k+".dir", "%q must be a folder's path (no surrounding spaces, no control characters)", d)
	case strings.ContainsAny(d, "*?["):
		v.add(k+".dir", "%q must be one folder, not a pattern", d)
	}
}

// validate checks the admission of the event at key k (k ends in
// ".admission"); accountKeys says whether auth.account_keys_file is set.
func (a Admission) validate(v *problems, k string, accountKeys bool) {
	if a.AdmitPerSecond != nil && !(*a.AdmitPerSecond > 0) {
		v.add(k+".admit_per_second", "must be > 0")
	}
	if a.AdmitPerSecond != nil && *a.AdmitPerSecond > 1e6 {
		v.add(k+".admit_per_second", "must be <= 1000000")
	}
	if a.MaxActive != nil && *a.MaxActive < 1 {
		v.add(k+".max_active", "must be >= 1")
	}
	if a.Capacity.BackendTPS < 0 {
		v.add(k+".capacity.backend_tps", "must be > 0")
	}
	if a.Capacity.CallsPerUser < 0 {
		v.add(k+".capacity.calls_per_user", "must be > 0")
	}
	if a.Capacity.RetryFactor < 1 && a.Capacity.RetryFactor != 0 {
		v.add(k+".capacity.retry_factor", "must be >= 1")
	}
	if a.Capacity.SessionSeconds < 0 {
		v.add(k+".capacity.session_seconds", "must be > 0")
	}
	if a.AccessTTL.D() < time.Second {
		v.add(k+".access_ttl", "must be >= 1s")
	}
	if a.Shards < 0 || a.Shards > MaxShards {
		v.add(k+".shards", "must be between 1 and %d, not %d", MaxShards, a.Shards)
	}
	if a.AbandonAfter.D() < time.Second {
		v.add(k+".abandon_after", "must be >= 1s")
	}
	if a.AwayClaimWithin.D() < time.Second {
		v.add(k+".away_claim_within", "must be >= 1s")
	}
	if a.JoinProofBits < 0 || a.JoinProofBits > MaxJoinProofBits {
		v.add(k+".join_proof_bits", "must be between 0 (off) and %d, not %d", MaxJoinProofBits, a.JoinProofBits)
	}
	switch a.Accounts {
	case "", AccountsOptional:
	case AccountsRequired:
		if !accountKeys {
			v.add(k+".accounts", "required needs auth.account_keys_file")
		}
	default:
		v.add(k+".accounts", "must be optional or required, not %q", a.Accounts)
	}
	switch a.Codes {
	case "", CodesOff, CodesRequired:
	default:
		v.add(k+".codes", "must be off or required, not %q", a.Codes)
	}
	switch a.Session {
	case "", SessionFixed, SessionSliding:
	default:
		v.add(k+".session", "must be fixed or sliding, not %q", a.Session)
	}
}

// validate checks the presale of event e at key k (k ends in ".presale");
// accountKeys says whether auth.account_keys_file is set.
func (p *Presale) validate(v *problems, k string, e Event, accountKeys bool) {
	if !accountKeys {
		v.add(k, "needs auth.account_keys_file (registration is by account)")
	}
	if e.PrequeueOpensAt != nil {
		v.add(k, "and prequeue_opens_at cannot both be set (the presale's selection is the draw)")
	}
	if e.OpensAt == nil {
		v.add(k, "needs opens_at (the first window opens then)")
	}
	switch {
	case p.RegistrationOpensAt == nil:
		v.add(k+".registration_opens_at", "is required")
	case p.RegistrationClosesAt == nil:
		v.add(k+".registration_closes_at", "is required")
	case !p.RegistrationClosesAt.After(*p.RegistrationOpensAt):
		v.add(k+".registration_closes_at", "must be after registration_opens_at")
	case e.OpensAt != nil && p.RegistrationClosesAt.After(*e.OpensAt):
		v.add(k+".registration_closes_at", "must not be after opens_at")
	}
	if p.Selected < 1 || p.Selected > MaxPresaleSelected {
		v.add(k+".selected", "must be between 1 and %d, not %d", MaxPresaleSelected, p.Selected)
	}
	if p.GroupSize < 1 {
		v.add(k+".group_size", "must be >= 1")
	}
	if p.Window.D() < time.Second {
		v.add(k+".window", "must be >= 1s")
	}
	if g := p.GeneralSaleAt.At; g != nil && e.OpensAt != nil && g.Before(*e.OpensAt) {
		v.add(k+".general_sale_at", "must not be before opens_at")
	}
}

// validate checks the showtime at key k; ids holds the showtime ids of the
// whole file so far, each with its key: an id is one showtime's.
func (s Showtime) validate(v *problems, k string, ids map[int64]string) {
	if s.ID < 1 {
		v.add(k+".id", "must be >= 1")
	} else if other, dup := ids[s.ID]; dup {
		v.add(k+".id", "%d duplicates %s", s.ID, other)
	} else {
		ids[s.ID] = k + ".id"
	}
	if s.Rows < 0 || s.Rows > MaxRows {
		v.add(k+".rows", "must be between 0 and %d", MaxRows)
	}
	if s.SeatsPerRow < 0 || s.SeatsPerRow > 999 {
		v.add(k+".seats_per_row", "must be between 0 and 999")
	}
	if (s.Rows == 0) != (s.SeatsPerRow == 0) {
		v.add(k+".rows", "rows and seats_per_row must both be set or both be 0")
	}
	if s.Rows == 0 && len(s.GeneralAdmission) == 0 {
		v.add(k, "has no seats and no general_admission")
	}
	if s.PriceCents < 0 {
		v.add(k+".price_cents", "must be >= 0")
	}
	codes := map[string]bool{}
	for g, b := range s.GeneralAdmission {
		gk := fmt.Sprintf("%s.general_admission[%d]", k, g)
		if !gaCodePattern.MatchString(b.Code) {
			v.add(gk+".code", "%q must match [A-Z0-9-]{1,32}", b.Code)
		} else if codes[b.Code] {
			v.add(gk+".code", "%q is duplicated", b.Code)
		}
		codes[b.Code] = true
		if b.Capacity < 1 {
			v.add(gk+".capacity", "must be >= 1")
		}
		if b.PriceCents < 0 {
			v.add(gk+".price_cents", "must be >= 0")
		}
	}
}

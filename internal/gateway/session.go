package gateway

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/gatekeeper"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/metrics"
)

// Sessions that last while they are used (DESIGN.md, "Always on"): an
// event with admission.session: sliding keeps a fan's place as long as its
// passes are used. Each use of a pass that verified (the gate's pass at the
// gate, the site's pass through forward auth) renews its place's active
// expiry to now + access_ttl in the very check of the place (one Redis
// call, as for a fixed session), and a pass with less than half of
// access_ttl left is issued again, ending access_ttl from now. A pass left
// unused for access_ttl ends with its place, which the admitter's tick
// then frees. Fixed sessions (the default) keep their window as it was.
//
// Why the renewals are few without any memory in the gateway: the check
// runs on every use anyway, so what must be bounded is the writes, and the
// place's own expiry in Redis is the one record that every gateway sees.
// The script writes only when now + access_ttl is at least access_ttl/10
// later than that expiry (package queue's activeScript): a place's expiry
// is written at most once per access_ttl/10, whatever the number of
// gateways and uses, and a busy site's page views are reads. A per-process
// memory of the last renewals would save no round trip (the check is one),
// would let every gateway write once per interval, and would cost a map and
// its lock on every request.
//
// A pass issued again carries the expiry in force after the call (its own
// write, or one made less than access_ttl/10 before), so no pass outlives
// its place (the gatekeeper's rule while Redis is away); every renewal's
// write waits for replicas under redis.wait_replicas, as anything a fan is
// told, since a later use may hand its expiry out. A pass past its half is
// renewed on the same terms as any other: a client that keeps using it (no
// cookie jar, a page's requests in flight together) is given a new pass on
// each use, but the place is written no more often for it. The script
// writes an active place only (ZADD XX behind the check, in one step): a
// place that was left, revoked, completed or ran out is never brought
// back, and a pass issued in a race with its end is refused at its next
// use.

// renewShare: a place's expiry is written at most once per
// access_ttl/renewShare.
const renewShare = 10

var passesReissued = metrics.CounterVec("waitroom_passes_reissued_total",
	"Passes of sliding sessions issued again at a use with less than half of access_ttl left, by event and pass (gate: the room's pass at the gate; site: a site's pass through forward auth).",
	"event", "pass")

// sessions checks the place of a pass that verified, for the gate and
// forward auth alike: active now (the gatekeeper's answer, through the
// breaker), or renewed in the same call for an event of sliding sessions.
type sessions struct {
	*edge
	keeper *gatekeeper.Gatekeeper
}

// usePass checks the place of a pass that verified, as activeNow does; for
// an event of sliding sessions the same call renews it, and again is the
// expiry a new pass is to carry when less than half of access_ttl is left
// of this one (zero: keep it).
func (s *sessions) usePass(ctx context.Context, claims pass.Claims) (active, degraded bool, again time.Time, err error) {
	ttl, sliding := s.sliding(claims.Event)
	if !sliding {
		active, degraded, err = s.activeNow(ctx, claims.Event, claims.Ticket)
		return active, degraded, time.Time{}, err
	}
	due := claims.ExpiresAt.Sub(s.now()) < ttl/2
	v, until, err := s.keeper.Use(ctx, claims.Event, claims.Ticket, ttl, ttl/renewShare)
	if due && until.After(claims.ExpiresAt) {
		again = until
	}
	return v != gatekeeper.PassRefused, v == gatekeeper.PassDegraded, again, err
}

// sliding reports whether event's sessions slide, and its access_ttl.
func (s *sessions) sliding(event string) (time.Duration, bool) {
	ev, ok := s.config().Event(event)
	if !ok || !ev.Admission.Sliding() {
		return 0, false
	}
	return s.settingsFor(ev).AccessTTL, true
}

// reissue hands the fan of claims its gate's pass again, ending at until.
func (s *gate) reissue(c *fiber.Ctx, claims pass.Claims, until time.Time) {
	passesReissued.WithLabelValues(claims.Event, "gate").Inc()
	s.handOut(c, claims, until)
}

// reissueSite hands the fan of ticket its site's pass of rule's event
// again, ending at until.
func (s *forwardAuth) reissueSite(c *fiber.Ctx, rule guardRule, ticket string, until time.Time) error {
	passesReissued.WithLabelValues(rule.event, "site").Inc()
	return s.handOutSite(c, rule, ticket, until)
}

// handOut gives the fan of claims a new pass of the gate ending at until:
// its cookie, and the headers a client that sends it as a Bearer reads.
func (s *gate) handOut(c *fiber.Ctx, claims pass.Claims, until time.Time) {
	tok, err := s.signer.MintFor(claims.Ticket, claims.Event, claims.Account, s.now(), until)
	if err != nil {
		s.log.Error("pass", "event", claims.Event, "err", err)
		return
	}
	noStore(c) // an answer with a pass in it
	s.setCookie(c, accessCookie+claims.Event, tok, until)
	c.Set("X-Waitroom-Access-Token", tok)
	c.Set("X-Waitroom-Access-Expires", until.UTC().Format(time.RFC3339))
}

// handOutSite gives the fan of ticket the site's pass of rule's event,
// ending at until, as the cookie of forward auth's 200.
func (s *forwardAuth) handOutSite(c *fiber.Ctx, rule guardRule, ticket string, until time.Time) error {
	site, err := s.signer.MintSite(ticket, rule.event, s.now(), until)
	if err != nil {
		return err
	}
	s.setCookie(c, rule.cookie, site, until)
	return nil
}

package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
)

// Visitors of a guarded site never see the room (DESIGN.md, "Always on"):
// a visitor of an auto event with no live pass is let straight through by
// forward auth itself while a join would be, its place made in the ask by
// the line's one join step (a join that takes only a place let in at once:
// line.EnterRequest.StraightOnly), the pass set as the site's cookie. The
// place counts against the address's join budget, as the room's joins do,
// so a client that drops its cookies cannot fill the cap: past the budget,
// or when the join would wait, the visitor goes to the room.

// straightThrough lets the visitor cl of rule's event straight through if a
// join would be (ok, and the answer sent); else it does nothing, and the
// caller sends the visitor to the room. A line that fails sends the visitor
// to the room too (which answers for itself): forward auth fails closed.
func (s *forwardAuth) straightThrough(c *fiber.Ctx, rule guardRule, cl client) (ok bool, err error) {
	ev, found := s.config().Event(rule.event)
	if !found {
		return false, nil // the event left the config since the rules were compiled
	}
	set := s.settingsFor(ev)
	if !straightThroughMay(ev, set, s.now) || s.linesSeen.recent(ev.ID, s.now()) {
		return false, nil
	}
	cfg := s.config()
	var e line.Entry
	err = s.redis.Do(c.UserContext(), func(ctx context.Context) (err error) {
		e, err = s.line.Enter(ctx, line.EnterRequest{
			Event: ev.ID, Settings: set, StraightOnly: true,
			Addr: joinBudgetOf(cl.addr, *cfg.Gateway.IPv6Prefix), Limit: *cfg.Gateway.JoinsPerIPPerMinute, Now: s.now(),
		})
		return err
	})
	var limited line.RateLimited
	switch {
	case errors.Is(err, line.ErrWouldWait), errors.Is(err, line.ErrSoldOut):
		s.linesSeen.saw(ev.ID, s.now())
		return false, nil
	case errors.As(err, &limited), errors.Is(err, line.ErrClosed), errors.Is(err, line.ErrNotOpen):
		return false, nil
	case err != nil:
		s.log.Warn("forward auth: straight through", "event", ev.ID, "err", err)
		return false, nil
	case e.Resumed || e.State != line.Admitted:
		s.log.Error("forward auth: straight through made a place not let in", "event", ev.ID, "state", e.State)
		return false, nil
	}
	counted(ev, e, s.now())
	site, err := s.signer.MintSite(e.ID, ev.ID, s.now(), e.ActiveUntil)
	if err != nil {
		return false, err
	}
	s.setCookie(c, rule.cookie, site, e.ActiveUntil)
	return true, s.letThrough(c, rule, e.ID, "through")
}

// straightThroughMay reports whether a visitor's ask may make a place for
// ev under set: an auto event whose joins need nothing an ask cannot
// bring (a proof of work, an access code, an account, a presale's
// invitation). Anything else goes to the room without asking Redis.
func straightThroughMay(ev *config.Event, set line.Settings, now func() time.Time) bool {
	switch {
	case set.Mode != line.ModeAuto, ev.Admission.JoinProofBits > 0, set.Codes, ev.Admission.AccountsRequired():
		return false
	case set.Presale:
		return set.GeneralSaleAt != nil && !now().Before(*set.GeneralSaleAt)
	}
	return true
}

// counted counts a new place the line made, at now: issued, and let
// straight through (with its wait, none) when it was admitted in its
// join's step. The join and forward auth both count with it.
func counted(ev *config.Event, e line.Entry, now time.Time) {
	ticketsIssued.WithLabelValues(ev.ID).Inc()
	if e.State == line.Admitted {
		straightThrough.WithLabelValues(ev.ID).Inc()
		observeAdmission(ev, e.Status, now)
	}
}

// lineRemembered is how long a gateway that saw an auto event refuse a
// place let straight through (a line, the cap full, the bucket spent, sold
// out) sends the visitors with no pass to the room without asking Redis:
// a client that hammers a full site with no cookie then costs Redis at most
// a few joins a second per event and gateway, not three calls an ask (the
// join budget's count, the join, the budget given back). A visitor sent to
// the room while the site has room again is let in there at once (an auto
// event's join), and comes back with its pass.
const lineRemembered = 250 * time.Millisecond

// linesSeen is when this gateway last saw each auto event refuse a place
// let straight through, by the gateway's clock (unix ns).
type linesSeen struct{ at sync.Map } // event → *atomic.Int64

// recent reports whether event refused one less than lineRemembered
// before now.
func (l *linesSeen) recent(event string, now time.Time) bool {
	v, ok := l.at.Load(event)
	return ok && now.UnixNano()-v.(*atomic.Int64).Load() < int64(lineRemembered)
}

// saw notes that event refused one at now.
func (l *linesSeen) saw(event string, now time.Time) {
	v, _ := l.at.LoadOrStore(event, new(atomic.Int64))
	v.(*atomic.Int64).Store(now.UnixNano())
}

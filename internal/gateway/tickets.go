package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/proof"
)

var (
	ticketsIssued = metrics.CounterVec("waitroom_tickets_issued_total",
		"New places in line handed out (resumed tickets not counted).", "event")
	straightThrough = metrics.CounterVec("waitroom_straight_through_total",
		"New places admitted in their join's own step, never waiting: an auto event's while there is room (forward auth's included), every passthrough join.", "event")
	waitSeconds = metrics.HistogramVec("waitroom_wait_seconds",
		"Time from join to admission, observed once per ticket when its fan first sees it admitted.",
		[]float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}, "event")
	etaError = metrics.HistogramVec("waitroom_eta_error_seconds",
		"Actual wait minus the ETA told at join, observed at admission (positive = we were optimistic).",
		[]float64{-1800, -600, -300, -120, -60, -30, -10, 0, 10, 30, 60, 120, 300, 600, 1800}, "event")
)

const (
	ticketCookie  = "wr_t_"
	accessCookie  = "wr_a_"
	ticketHeader  = "X-Waitroom-Ticket"
	accountHeader = "X-Waitroom-Account" // the origin site's account token (accounts.go)
	accountCookie = "wr_u"
)

// QueueLine is what the queue API asks of the line: a fan's way in, where
// it stands, and leaving.
type QueueLine interface {
	Enter(ctx context.Context, r line.EnterRequest) (line.Entry, error)
	Status(ctx context.Context, event string, ticket line.Ticket, set line.Settings) (line.Status, error)
	Leave(ctx context.Context, event string, ticket line.Ticket) error
}

// queueAPI is the fans' API of the line: join, status, leave; the pass
// an admitted place is granted, and the cookies that carry it.
type queueAPI struct {
	*edge
	line    QueueLine
	signer  *pass.Signer
	proofs  *proof.Keeper // the join challenges (proof.go)
	codes   *accessCodes  // a join's access code (presale.go)
	returns *returns      // a join's way back, and the one handed out (forwardauth.go)
}

// waitingJSON is a waiting ticket's answer; etaSeconds is null while
// paused or before opening; available (places left) is absent until the
// booking core publishes the event's inventory.
type waitingJSON struct {
	Ticket      string `json:"ticket,omitempty"`
	Status      string `json:"status"`
	Position    int64  `json:"position"`
	Ahead       int64  `json:"ahead"`
	ETASeconds  *int64 `json:"etaSeconds"`
	PollAfterMs int64  `json:"pollAfterMs"`
	Available   *int64 `json:"available,omitempty"`
}

// admittedJSON is an admitted ticket's answer, with its access pass, and
// the way back to the site the fan came from when it is one the event
// guards (forwardauth.go).
type admittedJSON struct {
	Ticket      string    `json:"ticket,omitempty"`
	Status      string    `json:"status"`
	AccessToken string    `json:"accessToken"`
	ExpiresAt   time.Time `json:"expiresAt"`
	ReturnURL   string    `json:"returnUrl,omitempty"`
}

func waiting(ticket string, p line.Position) waitingJSON {
	out := waitingJSON{Ticket: ticket, Status: string(line.Waiting), Position: p.Position, Ahead: p.Ahead,
		PollAfterMs: p.PollAfter.Milliseconds(), Available: p.Available}
	if out.Available != nil && *out.Available < 0 {
		// Reservations of holds in flight may take it below 0 for an instant.
		zero := int64(0)
		out.Available = &zero
	}
	if p.ETA != nil {
		secs := int64((*p.ETA + time.Second - 1) / time.Second)
		out.ETASeconds = &secs
	}
	return out
}

// grant mints the access pass for an admitted ticket (of account, "" =
// none) and sets its cookie.
func (s *queueAPI) grant(c *fiber.Ctx, ev *config.Event, ticket, id, account string, until time.Time) (admittedJSON, error) {
	tok, err := s.signer.MintFor(id, ev.ID, account, s.now(), until)
	if err != nil {
		return admittedJSON{}, err
	}
	s.setCookie(c, accessCookie+ev.ID, tok, until)
	return admittedJSON{Ticket: ticket, Status: string(line.Admitted), AccessToken: tok, ExpiresAt: until.UTC(),
		ReturnURL: s.returns.returnLink(c, ev, id)}, nil
}

func (s *edge) setCookie(c *fiber.Ctx, name, value string, expires time.Time) {
	putCookie(c, name, value, expires, s.secure(c))
}

func (s *edge) clearCookie(c *fiber.Ctx, name string) {
	putCookie(c, name, "", time.Unix(1, 0), s.secure(c))
}

// join: POST /api/v1/events/:event/tickets
//
// A fan who carries a live ticket of the event (cookie or header: a bad one
// never hides a good one, and is never an error here) gets that same place
// back, 200, claimed exactly as a status poll claims it, and needs no proof
// of work. So does a fan whose account (a verified account token, see
// accounts.go) has a live place in the event, from whatever device. Anyone
// else, including a fan whose ticket is no longer waiting or active, gets a
// new place at the back, 201: it pays the sale's proof of work if it asks
// one (428 proof_required with a challenge until it does), and counts
// against its network's join limit. The line decides all of it in one
// call (the line's Enter); this handler speaks HTTP.
func (s *queueAPI) join(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	set := s.settingsFor(ev)
	acct, err := s.accountOf(c, ev)
	if err != nil {
		return err
	}
	ret, err := s.returns.joinReturn(c, ev)
	if err != nil {
		return err
	}
	// The proof is checked here, before Redis: a bad one costs one HMAC and
	// one SHA-256, never Redis, and never the network's join budget.
	paid, bad := s.proofOf(c, ev)
	cfg := s.config()
	e, err := s.line.Enter(c.UserContext(), line.EnterRequest{
		Event: ev.ID, Settings: set, Tickets: s.carried(c, ev),
		Account: acct, ProofRequired: ev.Admission.JoinProofBits > 0, Proof: paid, Code: s.codes.codeOf(c, ev),
		Addr: joinBudgetOf(s.clientOf(c).addr, *cfg.Gateway.IPv6Prefix), Limit: *cfg.Gateway.JoinsPerIPPerMinute, Now: s.now(),
	})
	switch {
	case errors.Is(err, line.ErrProofRequired):
		return s.proofRequired(c, ev, bad)
	case errors.Is(err, line.ErrProofSpent), errors.Is(err, line.ErrProofExpired):
		return s.proofRequired(c, ev, err)
	case errors.Is(err, presale.ErrInvalidCode), errors.Is(err, presale.ErrCodeUsed):
		// The code was judged, so the proof was good and is spent: a guess
		// costs a proof as a place does.
		if paid != nil {
			joinProofs.WithLabelValues(ev.ID, proofOK).Inc()
		}
		return err
	case err != nil:
		return err
	}
	ticket := e.Ticket.String()
	if ret != "" {
		s.returns.keepReturn(c, ev, e.ID, ret)
	}
	if e.Resumed {
		return s.resume(c, ev, set, ticket, e.Status)
	}
	counted(ev, e, s.now())
	if paid != nil {
		joinProofs.WithLabelValues(ev.ID, proofOK).Inc()
	}
	s.setTicketCookie(c, ev, ticket, set)
	noStore(c)
	if e.State == line.Admitted {
		// Passthrough, or straight through an auto event with room: let
		// in and claimed at once, after no wait.
		out, err := s.grant(c, ev, ticket, e.ID, e.Account, e.ActiveUntil)
		if err != nil {
			return err
		}
		return c.Status(fiber.StatusCreated).JSON(out)
	}
	return sendWaiting(c, fiber.StatusCreated, waiting(ticket, e.Position))
}

// resume answers a join with the fan's live place ticket, 200, as its
// status st (read by this request, which claimed an admitted place) says.
func (s *queueAPI) resume(c *fiber.Ctx, ev *config.Event, set line.Settings, ticket string, st line.Status) error {
	switch st.State {
	case line.Waiting:
		s.setTicketCookie(c, ev, ticket, set)
		noStore(c)
		return sendWaiting(c, fiber.StatusOK, waiting(ticket, st.Position))
	case line.Admitted:
		observeAdmission(ev, st, s.now())
		s.setTicketCookie(c, ev, ticket, set)
		noStore(c)
		out, err := s.grant(c, ev, ticket, st.ID, st.Account, st.ActiveUntil)
		if err != nil {
			return err
		}
		return c.JSON(out)
	case line.Closed:
		return errEventClosed
	case line.SoldOut:
		return errSoldOut
	}
	return fmt.Errorf("join: resumed place %s in state %s", st.ID, st.State)
}

// setTicketCookie keeps the fan's ticket for as long as the sale may need it.
func (s *queueAPI) setTicketCookie(c *fiber.Ctx, ev *config.Event, ticket string, set line.Settings) {
	s.setCookie(c, ticketCookie+ev.ID, ticket, ticketCookieUntil(set, s.now()))
}

// ticketCookieUntil is how long the sale may need a ticket: a day, or an
// hour past its close.
func ticketCookieUntil(set line.Settings, now time.Time) time.Time {
	until := now.Add(24 * time.Hour)
	if set.ClosesAt != nil && set.ClosesAt.After(now) {
		until = set.ClosesAt.Add(time.Hour)
	}
	return until
}

// observeAdmission records, at now, the wait of a ticket whose place this
// request claimed (once per ticket: the claim happens once).
func observeAdmission(ev *config.Event, st line.Status, now time.Time) {
	if !st.FirstAdmission || st.JoinedAt.IsZero() {
		return
	}
	wait := now.Sub(st.JoinedAt)
	waitSeconds.WithLabelValues(ev.ID).Observe(wait.Seconds())
	if st.JoinETA != nil {
		etaError.WithLabelValues(ev.ID).Observe((wait - *st.JoinETA).Seconds())
	}
}

// ticketOf reads the event and the ticket of a ticket route. The ticket is
// checked here (its signature, for the event), once, before anything
// touches Redis: a bad one is line.ErrInvalidTicket (400 invalid_ticket),
// and the line takes the one parsed.
func (s *edge) ticketOf(c *fiber.Ctx) (*config.Event, line.Ticket, error) {
	ev, err := s.event(c)
	if err != nil {
		return nil, line.Ticket{}, err
	}
	t, err := s.tickets.Parse(ev.ID, utils.CopyString(c.Params("ticket")))
	if err != nil {
		return nil, line.Ticket{}, err
	}
	return ev, t, nil
}

// carried are the authentic tickets of ev the fan brings to a join (the
// header, then the cookie), each checked once here; a bad one is left out
// (it never hides a good one, and is no error of the join). They point
// into the request: the join uses them while it is served.
func (s *edge) carried(c *fiber.Ctx, ev *config.Event) []line.Ticket {
	var out []line.Ticket
	for _, str := range [2]string{c.Get(ticketHeader), c.Cookies(ticketCookie + ev.ID)} {
		if str == "" {
			continue
		}
		if t, err := s.tickets.Parse(ev.ID, str); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// status: GET /api/v1/events/:event/tickets/:ticket
func (s *queueAPI) status(c *fiber.Ctx) error {
	ev, ticket, err := s.ticketOf(c)
	if err != nil {
		return err
	}
	st, err := s.line.Status(c.UserContext(), ev.ID, ticket, s.settingsFor(ev))
	if err != nil {
		return err
	}
	noStore(c)
	switch st.State {
	case line.Waiting:
		return sendWaiting(c, fiber.StatusOK, waiting("", st.Position))
	case line.Admitted:
		observeAdmission(ev, st, s.now())
		out, err := s.grant(c, ev, "", st.ID, st.Account, st.ActiveUntil)
		if err != nil {
			return err
		}
		return c.JSON(out)
	case line.SoldOut:
		// The wait is over: the page says so and stops polling.
		return c.JSON(fiber.Map{"status": string(line.SoldOut)})
	default: // Expired, Closed
		s.clearCookie(c, accessCookie+ev.ID)
		return c.Status(fiber.StatusGone).JSON(fiber.Map{"status": string(st.State)})
	}
}

// leave: DELETE /api/v1/events/:event/tickets/:ticket
func (s *queueAPI) leave(c *fiber.Ctx) error {
	ev, ticket, err := s.ticketOf(c)
	if err != nil {
		return err
	}
	if err := s.line.Leave(c.UserContext(), ev.ID, ticket); err != nil {
		return err
	}
	s.clearCookie(c, ticketCookie+ev.ID)
	s.clearCookie(c, accessCookie+ev.ID)
	return c.SendStatus(fiber.StatusNoContent)
}

package gateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/queue"
)

var (
	ticketsIssued = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "waitroom_tickets_issued_total",
		Help: "New places in line handed out (resumed tickets not counted).",
	}, []string{"event"})
	waitSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "waitroom_wait_seconds",
		Help:    "Time from join to admission, observed once per ticket when its fan first sees it admitted.",
		Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
	}, []string{"event"})
	etaError = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "waitroom_eta_error_seconds",
		Help:    "Actual wait minus the ETA told at join, observed at admission (positive = we were optimistic).",
		Buckets: []float64{-1800, -600, -300, -120, -60, -30, -10, 0, 10, 30, 60, 120, 300, 600, 1800},
	}, []string{"event"})
)

const (
	ticketCookie  = "wr_t_"
	accessCookie  = "wr_a_"
	ticketHeader  = "X-Waitroom-Ticket"
	accountHeader = "X-Waitroom-Account" // the origin site's account token (accounts.go)
	accountCookie = "wr_u"
)

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

// admittedJSON is an admitted ticket's answer, with its access pass.
type admittedJSON struct {
	Ticket      string    `json:"ticket,omitempty"`
	Status      string    `json:"status"`
	AccessToken string    `json:"accessToken"`
	ExpiresAt   time.Time `json:"expiresAt"`
}

func waiting(ticket string, p queue.Position) waitingJSON {
	out := waitingJSON{Ticket: ticket, Status: string(queue.Waiting), Position: p.Position, Ahead: p.Ahead,
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
func (s *Server) grant(c *fiber.Ctx, ev *config.Event, ticket, id, account string, until time.Time) (admittedJSON, error) {
	tok, err := s.signer.MintFor(id, ev.ID, account, s.now(), until)
	if err != nil {
		return admittedJSON{}, err
	}
	s.setCookie(c, accessCookie+ev.ID, tok, until)
	return admittedJSON{Ticket: ticket, Status: string(queue.Admitted), AccessToken: tok, ExpiresAt: until.UTC()}, nil
}

func (s *Server) setCookie(c *fiber.Ctx, name, value string, expires time.Time) {
	putCookie(c, name, value, expires, s.secure(c))
}

func (s *Server) clearCookie(c *fiber.Ctx, name string) {
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
// against the per-IP join limit.
func (s *Server) join(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	set := s.settingsFor(ev)
	acct, err := s.accountOf(c, ev)
	if err != nil {
		return err
	}
	for _, t := range []string{c.Get(ticketHeader), c.Cookies(ticketCookie + ev.ID)} {
		if t == "" || s.line.CheckTicket(ev.ID, t) != nil {
			continue
		}
		if owner, _ := s.ticketAccount(ev.ID, t, acct); owner != acct {
			// Another account's place (or none): this fan joins as acct.
			continue
		}
		ticket := utils.CopyString(t)
		st, err := s.line.Status(ctx, ev.ID, ticket, set)
		if err != nil {
			return err
		}
		if done, err := s.resume(c, ev, set, ticket, st); done {
			return err
		}
		// Expired: the other candidate may still be live; if not, this fan
		// gets a new place like anyone else.
	}
	if acct != "" {
		ticket, st, err := s.line.AccountPlace(ctx, ev.ID, acct, set)
		if err != nil {
			return err
		}
		if ticket != "" {
			if done, err := s.resume(c, ev, set, ticket, st); done {
				return err
			}
		}
	}
	// A new place. Its proof of work first, when the sale asks one: a bad
	// proof is answered before Redis, and never counts against the address.
	paid, err := s.checkProof(c, ev)
	if err != nil {
		return err
	}
	// Counted against the fan's network, in every replica.
	cfg := s.config()
	addr, now := joinBudgetOf(s.clientOf(c).addr, *cfg.Gateway.IPv6Prefix), s.now()
	limit := *cfg.Gateway.JoinsPerIPPerMinute
	if wait, err := s.line.AllowJoin(ctx, addr, limit, now); err != nil {
		return err
	} else if wait > 0 {
		return rateLimited(int((wait + time.Second - 1) / time.Second))
	}
	// The proof is spent in the join's own script (one place per proof,
	// whatever the race), and so is the account's place (one per account).
	res, err := s.line.JoinWith(ctx, ev.ID, set, queue.JoinOptions{Proof: paid, Account: acct})
	if err == nil && res.Resumed {
		// Another device of the account made its place meanwhile: nothing
		// was bought, the proof is unspent, the address gets its join back.
		if limit > 0 {
			if err := s.line.UndoJoin(ctx, addr, now); err != nil {
				s.log.Warn("join: give back the address's join", "event", ev.ID, "err", err)
			}
		}
		if done, err := s.resume(c, ev, set, res.Ticket, res.Status); done {
			return err
		}
		return fmt.Errorf("join: the account's place %s ended as it was resumed", res.ID)
	}
	switch {
	case errors.Is(err, queue.ErrProofSpent), errors.Is(err, queue.ErrProofExpired):
		// No place was bought: the address gets its join back.
		if limit > 0 {
			if err := s.line.UndoJoin(ctx, addr, now); err != nil {
				s.log.Warn("join: give back the address's join", "event", ev.ID, "err", err)
			}
		}
		return s.proofRequired(c, ev, err)
	case errors.Is(err, queue.ErrNotOpen):
		ae := &apiError{Status: fiber.StatusForbidden, Code: "not_open", Message: "the line for this sale is not open yet"}
		if set.PrequeueOpensAt != nil {
			ae.OpensAt = set.PrequeueOpensAt.UTC().Format(time.RFC3339)
		} else if set.OpensAt != nil {
			ae.OpensAt = set.OpensAt.UTC().Format(time.RFC3339)
		}
		return ae
	case err != nil:
		return err
	}
	ticketsIssued.WithLabelValues(ev.ID).Inc()
	if paid != nil {
		joinProofs.WithLabelValues(ev.ID, proofOK).Inc()
	}
	s.setTicketCookie(c, ev, res.Ticket, set)
	noStore(c)
	if res.State == queue.Admitted {
		// Passthrough: let in and claimed at once, after no wait.
		waitSeconds.WithLabelValues(ev.ID).Observe(0)
		out, err := s.grant(c, ev, res.Ticket, res.ID, res.Account, res.ActiveUntil)
		if err != nil {
			return err
		}
		return c.Status(fiber.StatusCreated).JSON(out)
	}
	return sendWaiting(c, fiber.StatusCreated, waiting(res.Ticket, res.Position))
}

// ticketAccount is the account of ticket when the join brings one (acct);
// without, any live ticket of the fan's is resumed, and it is acct too.
func (s *Server) ticketAccount(event, ticket, acct string) (string, error) {
	if acct == "" {
		return "", nil
	}
	return s.line.TicketAccount(event, ticket)
}

// resume answers a join with the live place ticket, 200, as the status
// st (read by this request, which claimed an admitted place) says; done is
// false for a place that is no longer live (Expired).
func (s *Server) resume(c *fiber.Ctx, ev *config.Event, set queue.Settings, ticket string, st queue.Status) (done bool, err error) {
	switch st.State {
	case queue.Waiting:
		s.setTicketCookie(c, ev, ticket, set)
		noStore(c)
		return true, sendWaiting(c, fiber.StatusOK, waiting(ticket, st.Position))
	case queue.Admitted:
		s.observeAdmission(ev, st)
		s.setTicketCookie(c, ev, ticket, set)
		noStore(c)
		out, err := s.grant(c, ev, ticket, st.ID, st.Account, st.ActiveUntil)
		if err != nil {
			return true, err
		}
		return true, c.JSON(out)
	case queue.Closed:
		return true, errEventClosed
	case queue.SoldOut:
		return true, errSoldOut
	}
	return false, nil
}

// setTicketCookie keeps the fan's ticket for as long as the sale may need it.
func (s *Server) setTicketCookie(c *fiber.Ctx, ev *config.Event, ticket string, set queue.Settings) {
	until := s.now().Add(24 * time.Hour)
	if set.ClosesAt != nil && set.ClosesAt.After(s.now()) {
		until = set.ClosesAt.Add(time.Hour)
	}
	s.setCookie(c, ticketCookie+ev.ID, ticket, until)
}

// observeAdmission records the wait of a ticket whose place this request
// claimed (once per ticket: the claim happens once).
func (s *Server) observeAdmission(ev *config.Event, st queue.Status) {
	if !st.FirstAdmission || st.JoinedAt.IsZero() {
		return
	}
	wait := s.now().Sub(st.JoinedAt)
	waitSeconds.WithLabelValues(ev.ID).Observe(wait.Seconds())
	if st.JoinETA != nil {
		etaError.WithLabelValues(ev.ID).Observe((wait - *st.JoinETA).Seconds())
	}
}

// ticketOf reads the event and the ticket of a ticket route. The store
// checks the ticket's signature before it touches Redis and answers
// queue.ErrInvalidTicket (400) for a bad one: it is checked once, there.
func (s *Server) ticketOf(c *fiber.Ctx) (*config.Event, string, error) {
	ev, err := s.event(c)
	if err != nil {
		return nil, "", err
	}
	return ev, utils.CopyString(c.Params("ticket")), nil
}

// status: GET /api/v1/events/:event/tickets/:ticket
func (s *Server) status(c *fiber.Ctx) error {
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
	case queue.Waiting:
		return sendWaiting(c, fiber.StatusOK, waiting("", st.Position))
	case queue.Admitted:
		s.observeAdmission(ev, st)
		out, err := s.grant(c, ev, "", st.ID, st.Account, st.ActiveUntil)
		if err != nil {
			return err
		}
		return c.JSON(out)
	case queue.SoldOut:
		// The wait is over: the page says so and stops polling.
		return c.JSON(fiber.Map{"status": string(queue.SoldOut)})
	default: // Expired, Closed
		s.clearCookie(c, accessCookie+ev.ID)
		return c.Status(fiber.StatusGone).JSON(fiber.Map{"status": string(st.State)})
	}
}

// leave: DELETE /api/v1/events/:event/tickets/:ticket
func (s *Server) leave(c *fiber.Ctx) error {
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

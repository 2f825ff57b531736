package gateway

import (
	"context"
	"errors"
	"strconv"
	"strings"
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
	configReloads = promauto.NewCounter(prometheus.CounterOpts{
		Name: "waitroom_config_reloads_total",
		Help: "Config files re-read and put in force.",
	})
	configReloadErrors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "waitroom_config_reload_errors_total",
		Help: "Config edits refused (unreadable, invalid YAML or failed validation); the previous config stayed in force.",
	})
	etaError = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "waitroom_eta_error_seconds",
		Help:    "Actual wait minus the ETA told at join, observed at admission (positive = we were optimistic).",
		Buckets: []float64{-1800, -600, -300, -120, -60, -30, -10, 0, 10, 30, 60, 120, 300, 600, 1800},
	}, []string{"event"})
)

const (
	ticketCookie = "wr_t_"
	accessCookie = "wr_a_"
	ticketHeader = "X-Waitroom-Ticket"
)

// waitingJSON is a waiting ticket's answer; etaSeconds is null while
// paused or before opening.
type waitingJSON struct {
	Ticket      string `json:"ticket,omitempty"`
	Status      string `json:"status"`
	Position    int64  `json:"position"`
	Ahead       int64  `json:"ahead"`
	ETASeconds  *int64 `json:"etaSeconds"`
	PollAfterMs int64  `json:"pollAfterMs"`
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
		PollAfterMs: p.PollAfter.Milliseconds()}
	if p.ETA != nil {
		secs := int64((*p.ETA + time.Second - 1) / time.Second)
		out.ETASeconds = &secs
	}
	return out
}

// grant mints the access pass for an admitted ticket and sets its cookie.
func (s *Server) grant(c *fiber.Ctx, ev *config.Event, ticket, id string, until time.Time) (admittedJSON, error) {
	tok, err := s.signer.Mint(id, ev.ID, s.now(), until)
	if err != nil {
		return admittedJSON{}, err
	}
	s.setCookie(c, accessCookie+ev.ID, tok, until)
	return admittedJSON{Ticket: ticket, Status: string(queue.Admitted), AccessToken: tok, ExpiresAt: until.UTC()}, nil
}

func (s *Server) setCookie(c *fiber.Ctx, name, value string, expires time.Time) {
	c.Cookie(&fiber.Cookie{
		Name: name, Value: value, Path: "/", Expires: expires,
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: c.Secure(),
	})
}

func (s *Server) clearCookie(c *fiber.Ctx, name string) {
	c.Cookie(&fiber.Cookie{Name: name, Value: "", Path: "/", Expires: time.Unix(1, 0),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: c.Secure()})
}

// join: POST /api/v1/events/:event/tickets
func (s *Server) join(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	// The fan's live ticket, from the header or the cookie: a bad one (of
	// another event, forged, stale) never hides a good one, and is never an
	// error on join.
	existing := ""
	for _, t := range []string{c.Get(ticketHeader), c.Cookies(ticketCookie + ev.ID)} {
		if t != "" && s.line.CheckTicket(ev.ID, t) == nil {
			existing = t
			break
		}
	}
	set := s.settingsFor(ev)
	if existing == "" {
		if retry, err := s.allowJoin(ctx, c.IP()); err != nil {
			return err
		} else if retry > 0 {
			return rateLimited(retry)
		}
	}
	res, err := s.line.Join(ctx, ev.ID, utils.CopyString(existing), set)
	switch {
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
	if !res.Resumed {
		ticketsIssued.WithLabelValues(ev.ID).Inc()
	}
	cookieUntil := s.now().Add(24 * time.Hour)
	if set.ClosesAt != nil && set.ClosesAt.After(s.now()) {
		cookieUntil = set.ClosesAt.Add(time.Hour)
	}
	s.setCookie(c, ticketCookie+ev.ID, res.Ticket, cookieUntil)
	code := fiber.StatusCreated
	if res.Resumed {
		code = fiber.StatusOK
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	if res.State == queue.Admitted {
		out, err := s.grant(c, ev, res.Ticket, res.ID, res.ActiveUntil)
		if err != nil {
			return err
		}
		return c.Status(code).JSON(out)
	}
	return c.Status(code).JSON(waiting(res.Ticket, res.Position))
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
	c.Set(fiber.HeaderCacheControl, "no-store")
	switch st.State {
	case queue.Waiting:
		return c.JSON(waiting("", st.Position))
	case queue.Admitted:
		s.observeAdmission(ev, st)
		out, err := s.grant(c, ev, "", st.ID, st.ActiveUntil)
		if err != nil {
			return err
		}
		return c.JSON(out)
	default: // Expired, Closed
		s.clearCookie(c, accessCookie+ev.ID)
		return c.Status(fiber.StatusGone).JSON(fiber.Map{"status": string(st.State)})
	}
}

// observeAdmission records the wait, once per ticket: on the first poll (by
// the API or the waiting room's page) that sees it admitted.
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

// allowJoin is the per-IP join limit, a fixed one-minute window counted in
// Redis so that every gateway replica shares it. It returns the seconds to
// wait when the limit is reached, 0 when the join may go on.
func (s *Server) allowJoin(ctx context.Context, ip string) (int, error) {
	limit := *s.config().Gateway.JoinsPerIPPerMinute
	if limit == 0 {
		return 0, nil
	}
	now := s.now()
	window := now.Unix() / 60
	key := "wr:joinlimit:{" + strings.ReplaceAll(ip, "}", "") + "}:" + strconv.FormatInt(window, 10)
	pipe := s.rdb.Pipeline()
	incr := pipe.Incr(ctx, key)
	pipe.Expire(ctx, key, 2*time.Minute)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	if incr.Val() > int64(limit) {
		return int(60 - now.Unix()%60), nil
	}
	return 0, nil
}

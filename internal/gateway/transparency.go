package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/queue"
)

// The transparency routes (DESIGN.md "Transparency"): the committed
// lottery anyone can check, and each sale's report from its own records.

// lotteryJSON: seed, entries, entriesDigest and drawnAt appear once drawn,
// together, and never before.
type lotteryJSON struct {
	Commitment    string     `json:"commitment"`
	CommittedAt   time.Time  `json:"committedAt"`
	DrawAt        *time.Time `json:"drawAt"`
	Seed          string     `json:"seed,omitempty"`
	Entries       *int64     `json:"entries,omitempty"`
	EntriesDigest string     `json:"entriesDigest,omitempty"`
	DrawnAt       *time.Time `json:"drawnAt,omitempty"`
}

func lotteryView(l queue.Lottery) lotteryJSON {
	out := lotteryJSON{Commitment: l.Commitment, CommittedAt: l.CommittedAt.UTC()}
	if !l.DrawAt.IsZero() {
		at := l.DrawAt.UTC()
		out.DrawAt = &at
	}
	if l.Drawn {
		n, at := l.Entries, l.DrawnAt.UTC()
		out.Seed, out.EntriesDigest, out.Entries, out.DrawnAt = l.Seed, l.EntriesDigest, &n, &at
	}
	return out
}

// notDrawn is the answer for a lottery not drawn yet: before opening, or
// being drawn now (the sale opened moments ago).
func (s *Server) notDrawn(ctx context.Context, ev *config.Event) error {
	l, err := s.line.Lottery(ctx, ev.ID, s.settingsFor(ev))
	if err == nil && !l.DrawAt.IsZero() && !s.now().Before(l.DrawAt) {
		return errDrawing
	}
	return errNotDrawn
}

// lottery: GET /api/v1/events/:event/lottery
func (s *Server) lottery(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	l, err := s.line.Lottery(c.UserContext(), ev.ID, s.settingsFor(ev))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.JSON(lotteryView(l))
}

// ticketDraw: GET /api/v1/events/:event/lottery/:ticket (the signed
// ticket the fan holds).
func (s *Server) ticketDraw(c *fiber.Ctx) error {
	ev, ticket, err := s.ticketOf(c)
	if err != nil {
		return err
	}
	d, err := s.line.TicketDraw(c.UserContext(), ev.ID, ticket)
	switch {
	case errors.Is(err, queue.ErrNotDrawn):
		return s.notDrawn(c.UserContext(), ev)
	case err != nil:
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(fiber.Map{"ticketId": d.TicketID, "draw": d.Draw, "rank": d.Rank})
}

// lotteryEntries: GET /api/v1/events/:event/lottery/entries — every
// entry's ticket id in rank order, one per line, streamed part by part (a
// million entries are never held at once). Drawn only: 409 not_drawn
// before.
func (s *Server) lotteryEntries(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	l, err := s.line.Lottery(c.UserContext(), ev.ID, s.settingsFor(ev))
	switch {
	case err != nil:
		return err
	case !l.Drawn:
		return s.notDrawn(c.UserContext(), ev)
	}
	return s.streamList(c, "lottery entries", ev.ID, s.line.LotteryEntries)
}

// streamList answers a drawn list, one id per line, as write streams it
// part by part, cached a minute (a drawn list never changes).
func (s *Server) streamList(c *fiber.Ctx, what, event string, write func(ctx context.Context, event string, w io.Writer) error) error {
	c.Set(fiber.HeaderContentType, "text/plain; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "public, max-age=60")
	log := s.log
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		// The handler has returned: the request's budget is gone. The
		// list gets its own, generous for a slow reader of a million lines.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := write(ctx, event, &flushing{w: w}); err != nil {
			log.Warn(what, "event", event, "err", err)
		}
	})
	return nil
}

// flushing sends each part to the client as it is written.
type flushing struct{ w *bufio.Writer }

func (f *flushing) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}

// reportJSON is the sale's report (DESIGN.md).
type reportJSON struct {
	Event             string          `json:"event"`
	Joined            int64           `json:"joined"`
	Admitted          int64           `json:"admitted"`
	Left              int64           `json:"left"`
	Abandoned         int64           `json:"abandoned"`
	AdmittedPerSecond rateJSON        `json:"admittedPerSecond"`
	FIFOInversions    int64           `json:"fifoInversions"`
	WaitSeconds       percentilesJSON `json:"waitSeconds"`
	ETAErrorSeconds   percentilesJSON `json:"etaErrorSeconds"`
	SoldOutAt         *time.Time      `json:"soldOutAt"`
	// The presale's and the codes' (0 for a sale without them).
	Registrations int64 `json:"registrations"`
	Selected      int64 `json:"selected"`
	Invited       int64 `json:"invited"`
	ToppedUp      int64 `json:"toppedUp"`
	CodesUsed     int64 `json:"codesUsed"`
}

// rateJSON: mean is over the time the open line was non-empty;
// configured is the rate configured over that time.
type rateJSON struct {
	Mean       float64      `json:"mean"`
	Configured float64      `json:"configured"`
	PerMinute  []minuteJSON `json:"perMinute"`
}

type minuteJSON struct {
	At         time.Time `json:"at"`
	Admitted   int64     `json:"admitted"`
	PerSecond  float64   `json:"perSecond"`
	Configured float64   `json:"configured"`
	Waiting    int64     `json:"waiting"`
}

// percentilesJSON: p50 and p95 are null while nothing was measured.
type percentilesJSON struct {
	P50   *float64 `json:"p50"`
	P95   *float64 `json:"p95"`
	Count int64    `json:"count"`
}

func reportView(event string, r queue.Report) reportJSON {
	out := reportJSON{
		Event: event, Joined: r.Joined, Admitted: r.Admitted, Left: r.Left, Abandoned: r.Abandoned,
		AdmittedPerSecond: rateJSON{Mean: round2(r.MeanPerSecond), Configured: round2(r.ConfiguredPerSecond), PerMinute: []minuteJSON{}},
		FIFOInversions:    r.FIFOInversions,
		WaitSeconds:       percentilesOf(r.Wait), ETAErrorSeconds: percentilesOf(r.ETAError),
		SoldOutAt: r.SoldOutAt,
	}
	for _, m := range r.Minutes {
		out.AdmittedPerSecond.PerMinute = append(out.AdmittedPerSecond.PerMinute, minuteJSON{
			At: m.At, Admitted: m.Admitted, PerSecond: round2(m.PerSecond()), Configured: m.Configured, Waiting: m.Waiting,
		})
	}
	return out
}

func percentilesOf(p queue.Percentiles) percentilesJSON {
	out := percentilesJSON{Count: p.Count}
	if p.Count > 0 {
		p50, p95 := p.P50, p.P95
		out.P50, out.P95 = &p50, &p95
	}
	return out
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// report: GET /api/v1/events/:event/report
func (s *Server) report(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	r, err := s.line.Report(c.UserContext(), ev.ID)
	if err != nil {
		return err
	}
	out := reportView(ev.ID, r)
	if s.presale != nil {
		f, err := s.presale.Figures(c.UserContext(), ev.ID)
		if err != nil {
			return err
		}
		out.Registrations, out.Selected, out.Invited, out.ToppedUp, out.CodesUsed = f.Registrations, f.Selected, f.Invited, f.ToppedUp, f.CodesUsed
	}
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.JSON(out)
}

// reportPage: GET /e/:event/report — the report for fans and the press,
// rendered by the server (charts as inline SVG), with the lottery's proof
// and, for a fan whose ticket was in the draw, its own draw and rank.
func (s *Server) reportPage(c *fiber.Ctx, l *web.Locale) error {
	ev, err := s.pageEvent(c, l)
	if ev == nil {
		return err
	}
	ctx := c.UserContext()
	set := s.settingsFor(ev)
	r, err := s.line.Report(ctx, ev.ID)
	if err != nil {
		return err
	}
	zone := web.ZoneOf(ev)
	v := &web.Report{
		Joined: r.Joined, Admitted: r.Admitted, Left: r.Left, Abandoned: r.Abandoned,
		Mean: r.MeanPerSecond, Configured: r.ConfiguredPerSecond, Waited: r.Busy > 0, Inversions: r.FIFOInversions,
	}
	if r.Wait.Count > 0 {
		v.Wait = &web.Spread{P50: r.Wait.P50, P95: r.Wait.P95}
	}
	if r.ETAError.Count > 0 {
		v.ETAError = &web.Spread{P50: r.ETAError.P50, P95: r.ETAError.P95}
	}
	if r.SoldOutAt != nil {
		at := r.SoldOutAt.In(zone)
		v.SoldOutAt = &at
	}
	for _, m := range r.Minutes {
		v.Minutes = append(v.Minutes, web.Minute{At: m.At.In(zone), PerSecond: m.PerSecond(), Configured: m.Configured, Waiting: m.Waiting})
	}
	lot, err := s.line.Lottery(ctx, ev.ID, set)
	switch {
	case errors.Is(err, queue.ErrNoLottery):
	case err != nil:
		return err
	default:
		lv := lotteryView(lot)
		v.Lottery = &web.Lottery{Commitment: lv.Commitment, CommittedAt: lot.CommittedAt.In(zone), Seed: lv.Seed, Entries: lv.Entries}
		if lv.DrawAt != nil {
			at := lv.DrawAt.In(zone)
			v.Lottery.DrawAt = &at
		}
		if t := s.ticketCookie(c, ev); t != "" && lot.Drawn {
			if d, err := s.line.TicketDraw(ctx, ev.ID, t); err == nil {
				v.Lottery.Ticket, v.Lottery.Draw, v.Lottery.Rank = d.TicketID, d.Draw, d.Rank
			}
		}
	}
	noStore(c)
	return s.render(c, fiber.StatusOK, web.ReportPage, l, &web.Page{
		Title: l.T("report.pageTitle", "event", ev.Name), Event: s.eventView(ctx, ev), Report: v,
	})
}

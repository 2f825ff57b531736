package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/presale"
)

// The transparency routes (DESIGN.md "Transparency"): the committed
// lottery anyone can check, and each sale's report from its own records.

// TransparencyLine is what the transparency routes ask of the line: the
// lottery, a ticket's draw, the drawn list and the report.
type TransparencyLine interface {
	Lottery(ctx context.Context, event string, set line.Settings) (line.Draw, error)
	TicketDraw(ctx context.Context, event string, ticket line.Ticket) (line.TicketDraw, error)
	LotteryEntries(ctx context.Context, event string, w io.Writer) error
	Report(ctx context.Context, event string) (line.Report, error)
}

// TransparencyPresale is what the report asks of the presale: its figures.
type TransparencyPresale interface {
	Figures(ctx context.Context, event string) (presale.Figures, error)
}

// transparency is the lottery's routes and the report, as JSON and as the
// report page.
type transparency struct {
	*edge
	line    TransparencyLine
	presale TransparencyPresale // nil: no presale's figures (0)
	lists   *publishedLists
	views   *views
}

// lotteryJSON: seed, nonce, entries, entriesDigest and drawnAt appear once
// drawn, together, and never before (the seed is derived from the draw
// secret and the nonce: docs/QUEUE.md, how to check a draw).
type lotteryJSON struct {
	Commitment    string     `json:"commitment"`
	CommittedAt   time.Time  `json:"committedAt"`
	DrawAt        *time.Time `json:"drawAt"`
	Seed          string     `json:"seed,omitempty"`
	Nonce         string     `json:"nonce,omitempty"`
	Entries       *int64     `json:"entries,omitempty"`
	EntriesDigest string     `json:"entriesDigest,omitempty"`
	DrawnAt       *time.Time `json:"drawnAt,omitempty"`
}

func lotteryView(l line.Draw) lotteryJSON {
	out := lotteryJSON{Commitment: l.Commitment, CommittedAt: l.CommittedAt.UTC()}
	if !l.DrawAt.IsZero() {
		at := l.DrawAt.UTC()
		out.DrawAt = &at
	}
	if l.Drawn {
		n, at := l.Entries, l.DrawnAt.UTC()
		out.Seed, out.Nonce, out.EntriesDigest, out.Entries, out.DrawnAt = l.Seed, l.Nonce, l.EntriesDigest, &n, &at
	}
	return out
}

// notDrawn is the answer for a lottery not drawn yet: before opening, or
// being drawn now (the sale opened moments ago).
func (s *transparency) notDrawn(ctx context.Context, ev *config.Event) error {
	l, err := s.line.Lottery(ctx, ev.ID, s.settingsFor(ev))
	if err == nil && !l.DrawAt.IsZero() && !s.now().Before(l.DrawAt) {
		return errDrawing
	}
	return errNotDrawn
}

// lottery: GET /api/v1/events/:event/lottery
func (s *transparency) lottery(c *fiber.Ctx) error {
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
func (s *transparency) ticketDraw(c *fiber.Ctx) error {
	ev, ticket, err := s.ticketOf(c)
	if err != nil {
		return err
	}
	d, err := s.line.TicketDraw(c.UserContext(), ev.ID, ticket)
	switch {
	case errors.Is(err, line.ErrNotDrawn):
		return s.notDrawn(c.UserContext(), ev)
	case err != nil:
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(fiber.Map{"ticketId": d.TicketID, "draw": d.Draw, "rank": d.Rank})
}

// lotteryEntries: GET /api/v1/events/:event/lottery/entries — every
// entry's ticket id in rank order, one per line. Drawn only: 409 not_drawn
// before (never cached); once drawn, the published list (publishedList).
func (s *transparency) lotteryEntries(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	if l := s.lists.get(listLottery, ev.ID); l != nil {
		return s.lists.serveList(c, l)
	}
	l, err := s.line.Lottery(c.UserContext(), ev.ID, s.settingsFor(ev))
	switch {
	case err != nil:
		return err
	case !l.Drawn:
		return s.notDrawn(c.UserContext(), ev)
	}
	return s.lists.publishedList(c, listLottery, ev.ID, l, s.line.LotteryEntries)
}

// Published lists are cheap (DESIGN.md, "Fair play, third round"). A drawn
// list never changes, so each gateway reads it from Redis once and answers
// every repeat from its copy: with a strong ETag (the list's digest and
// count), immutable for a year, 304 to a matching If-None-Match, gzipped
// to a client that takes gzip. It keeps the list both plain and gzipped (a
// million ids are 28 MB plain and 21 MB gzipped: the ids are random, so
// gzip saves a quarter; docs/EDGE.md): 49 MB of memory per million, where
// unzipping for each plain download (curl's default) would cost some 0.3 s
// of CPU a download, and zipping for each gzip one three times that. Each
// address (its network, as the join's limit counts it) gets
// listDownloadsPerMinute downloads a minute across the gateways; a 304
// costs nothing and is not counted.

// The kinds of published lists.
const (
	listLottery   = "lottery"
	listSelection = "selection"
)

// listDownloadsPerMinute bounds one address's downloads of the published
// lists.
const listDownloadsPerMinute = 10

// listCacheControl: a drawn list is the same bytes for ever.
const listCacheControl = "public, max-age=31536000, immutable"

// listLoadBudget bounds a list's one read from Redis (a million ids, part
// by part), whoever asked for it first.
const listLoadBudget = 2 * time.Minute

// drawnList is one drawn list as this gateway keeps it.
type drawnList struct {
	etag   string // the plain list's ETag; the gzipped one's is gzETag
	gzETag string
	plain  []byte
	gz     []byte
}

// ListsLine is what serving a published list asks of the line: the
// downloads' limit.
type ListsLine interface {
	// AllowDownload counts a published list's download from addr against
	// limit a minute.
	AllowDownload(ctx context.Context, addr netip.Addr, limit int, now time.Time) (time.Duration, error)
}

// publishedLists are the drawn lists a gateway served, by kind and event;
// each is read from Redis once, whoever asks at the same time waiting for
// that one read. The lottery's and the presale's selection's are served
// by them.
type publishedLists struct {
	*edge
	line ListsLine

	mu      sync.Mutex
	lists   map[string]*drawnList
	loading map[string]chan struct{}
}

func newPublishedLists(e *edge, l ListsLine) *publishedLists {
	return &publishedLists{edge: e, line: l, lists: map[string]*drawnList{}, loading: map[string]chan struct{}{}}
}

func listKey(kind, event string) string { return kind + "/" + event }

// get is the kept list of kind for event, nil when none yet.
func (p *publishedLists) get(kind, event string) *drawnList {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lists[listKey(kind, event)]
}

// keepOnly forgets the lists of events no longer in cfg (a reload).
func (p *publishedLists) keepOnly(cfg *config.Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key := range p.lists {
		_, event, _ := strings.Cut(key, "/")
		if _, ok := cfg.Event(event); !ok {
			delete(p.lists, key)
		}
	}
}

// load returns the list of kind for event that pub describes, read with
// write once: the first caller reads it, the others wait for that read.
func (p *publishedLists) load(ctx context.Context, kind, event string, pub line.Draw, write func(ctx context.Context, event string, w io.Writer) error) (*drawnList, error) {
	key := listKey(kind, event)
	for {
		p.mu.Lock()
		if l := p.lists[key]; l != nil {
			p.mu.Unlock()
			return l, nil
		}
		wait, busy := p.loading[key]
		if !busy {
			done := make(chan struct{})
			p.loading[key] = done
			p.mu.Unlock()
			l, err := readList(event, pub, write)
			p.mu.Lock()
			if err == nil {
				p.lists[key] = l
			}
			delete(p.loading, key)
			p.mu.Unlock()
			close(done)
			return l, err
		}
		p.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// readList reads a drawn list from Redis, and gzips it once. It has its
// own budget: whoever asked first may go away, the others wait for it.
// (gzip's fastest level: the ids are random, its best saves no more.)
func readList(event string, pub line.Draw, write func(ctx context.Context, event string, w io.Writer) error) (*drawnList, error) {
	ctx, cancel := context.WithTimeout(context.Background(), listLoadBudget)
	defer cancel()
	var plain, gz bytes.Buffer
	if err := write(ctx, event, &plain); err != nil {
		return nil, err
	}
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if _, err := zw.Write(plain.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	tag := listTag(pub)
	return &drawnList{etag: `"` + tag + `"`, gzETag: `"` + tag + `-gz"`, plain: plain.Bytes(), gz: bytes.Clone(gz.Bytes())}, nil
}

// listTag is a drawn list's identity, its ETag's content: its entries'
// digest and count.
func listTag(pub line.Draw) string {
	return pub.EntriesDigest + "-" + strconv.FormatInt(pub.Entries, 10)
}

// publishedList answers the drawn list of kind for event (pub says it is
// drawn, and which), read once and kept.
func (s *publishedLists) publishedList(c *fiber.Ctx, kind, event string, pub line.Draw, write func(ctx context.Context, event string, w io.Writer) error) error {
	tag := listTag(pub)
	if matches(c.Get(fiber.HeaderIfNoneMatch), `"`+tag+`"`, `"`+tag+`-gz"`) {
		// The client has it already: no need to read it to say so.
		listHeaders(c, `"`+tag+`"`)
		return c.SendStatus(fiber.StatusNotModified)
	}
	l, err := s.load(c.UserContext(), kind, event, pub, write)
	if err != nil {
		return err
	}
	return s.serveList(c, l)
}

// serveList answers a kept list: 304 to a matching If-None-Match, 429 past
// the address's downloads this minute, else the list, gzipped when the
// client takes gzip.
func (s *publishedLists) serveList(c *fiber.Ctx, l *drawnList) error {
	if matches(c.Get(fiber.HeaderIfNoneMatch), l.etag, l.gzETag) {
		listHeaders(c, l.etag)
		return c.SendStatus(fiber.StatusNotModified)
	}
	cfg := s.config()
	wait, err := s.line.AllowDownload(c.UserContext(), joinBudgetOf(s.clientOf(c).addr, *cfg.Gateway.IPv6Prefix), listDownloadsPerMinute, s.now())
	switch {
	case err != nil:
		// The copy costs Redis nothing: a limit that cannot be counted
		// does not keep it from the fan.
		s.log.Warn("published list: the download limit could not be counted", "err", err)
	case wait > 0:
		return listsLimited(int((wait + time.Second - 1) / time.Second))
	}
	c.Set(fiber.HeaderContentType, "text/plain; charset=utf-8")
	if takesGzip(c.Get(fiber.HeaderAcceptEncoding)) {
		listHeaders(c, l.gzETag)
		c.Set(fiber.HeaderContentEncoding, "gzip")
		c.Response().SetBodyRaw(l.gz)
		return nil
	}
	listHeaders(c, l.etag)
	c.Response().SetBodyRaw(l.plain)
	return nil
}

// listHeaders are the headers of every answer of a drawn list, 304 too.
func listHeaders(c *fiber.Ctx, etag string) {
	c.Set(fiber.HeaderETag, etag)
	c.Set(fiber.HeaderCacheControl, listCacheControl)
	c.Set(fiber.HeaderVary, fiber.HeaderAcceptEncoding)
}

// matches reports whether an If-None-Match header names one of etags (the
// weak comparison RFC 9110 asks of If-None-Match: W/ is ignored), or is *.
func matches(header string, etags ...string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || (t != "" && slices.Contains(etags, t)) {
			return true
		}
	}
	return false
}

// takesGzip reports whether an Accept-Encoding header takes gzip (named,
// or *, with a q above 0).
func takesGzip(header string) bool {
	gz, star := -1.0, -1.0
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				q = f
			}
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "gzip", "x-gzip":
			gz = q
		case "*":
			star = q
		}
	}
	if gz >= 0 {
		return gz > 0
	}
	return star > 0
}

// reportJSON is the sale's report (DESIGN.md).
type reportJSON struct {
	Event             string          `json:"event"`
	Joined            int64           `json:"joined"`
	Admitted          int64           `json:"admitted"`
	Left              int64           `json:"left"`
	Abandoned         int64           `json:"abandoned"`
	StraightThrough   int64           `json:"straightThrough"` // of admitted: let in at their join (DESIGN.md, "Always on")
	AdmittedPerSecond rateJSON        `json:"admittedPerSecond"`
	FIFOInversions    int64           `json:"fifoInversions"`
	RankInversions    int64           `json:"rankInversions"`
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

// minuteJSON: admitted are the fans the line let in that minute (its
// perSecond is theirs); straightThrough the joins let in at once, apart.
type minuteJSON struct {
	At              time.Time `json:"at"`
	Admitted        int64     `json:"admitted"`
	StraightThrough int64     `json:"straightThrough"`
	PerSecond       float64   `json:"perSecond"`
	Configured      float64   `json:"configured"`
	Waiting         int64     `json:"waiting"`
}

// percentilesJSON: p50 and p95 are null while nothing was measured.
type percentilesJSON struct {
	P50   *float64 `json:"p50"`
	P95   *float64 `json:"p95"`
	Count int64    `json:"count"`
}

func reportView(event string, r line.Report) reportJSON {
	out := reportJSON{
		Event: event, Joined: r.Joined, Admitted: r.Admitted, Left: r.Left, Abandoned: r.Abandoned, StraightThrough: r.StraightThrough,
		AdmittedPerSecond: rateJSON{Mean: round2(r.MeanPerSecond), Configured: round2(r.ConfiguredPerSecond), PerMinute: []minuteJSON{}},
		FIFOInversions:    r.FIFOInversions,
		RankInversions:    r.RankInversions,
		WaitSeconds:       percentilesOf(r.Wait), ETAErrorSeconds: percentilesOf(r.ETAError),
		SoldOutAt: r.SoldOutAt,
	}
	for _, m := range r.Minutes {
		out.AdmittedPerSecond.PerMinute = append(out.AdmittedPerSecond.PerMinute, minuteJSON{
			At: m.At, Admitted: m.Admitted, StraightThrough: m.StraightThrough, PerSecond: round2(m.PerSecond()), Configured: m.Configured, Waiting: m.Waiting,
		})
	}
	return out
}

func percentilesOf(p line.Percentiles) percentilesJSON {
	out := percentilesJSON{Count: p.Count}
	if p.Count > 0 {
		p50, p95 := p.P50, p.P95
		out.P50, out.P95 = &p50, &p95
	}
	return out
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// report: GET /api/v1/events/:event/report
func (s *transparency) report(c *fiber.Ctx) error {
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
func (s *transparency) reportPage(c *fiber.Ctx, l *web.Locale) error {
	ev, err := s.views.pageEvent(c, l)
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
		Joined: r.Joined, Admitted: r.Admitted, Left: r.Left, Abandoned: r.Abandoned, StraightThrough: r.StraightThrough,
		Mean: r.MeanPerSecond, Configured: r.ConfiguredPerSecond, Waited: r.Busy > 0, Inversions: r.FIFOInversions,
		RankInversions: r.RankInversions,
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
	case errors.Is(err, line.ErrNoLottery):
	case err != nil:
		return err
	default:
		lv := lotteryView(lot)
		v.Lottery = &web.Lottery{Commitment: lv.Commitment, CommittedAt: lot.CommittedAt.In(zone), Seed: lv.Seed, Entries: lv.Entries}
		if lv.DrawAt != nil {
			at := lv.DrawAt.In(zone)
			v.Lottery.DrawAt = &at
		}
		if t := s.ticketCookie(c, ev); !t.IsZero() && lot.Drawn {
			if d, err := s.line.TicketDraw(ctx, ev.ID, t); err == nil {
				v.Lottery.Ticket, v.Lottery.Draw, v.Lottery.Rank = d.TicketID, d.Draw, d.Rank
			}
		}
	}
	noStore(c)
	return s.views.render(c, fiber.StatusOK, web.ReportPage, l, &web.Page{
		Title: l.T("report.pageTitle", "event", ev.Name), Event: s.views.eventView(ctx, ev), Report: v,
	})
}

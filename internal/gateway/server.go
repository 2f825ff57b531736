// Package gateway is the edge: the fan's pages, the queue API (join, status,
// leave, events), the JWKS of the access pass, and the gate, the only way in
// to the booking API, which lets a request through only with a valid pass
// whose ticket is still active.
//
// It is laid out by feature: each (the queue API, the pages and the room,
// the presale and the codes, transparency, forward auth, the gate, the
// operators' API) is a small type holding the edge every feature reads
// (edge.go), its own part of the line declared beside it, and what else it
// uses. Server builds them, the app from the one route table (routes.go)
// and the shared middleware; a route is a row of that table naming its
// feature's method.
package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gatekeeper"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/breaker"
	"github.com/waitroom/waitroom/internal/proof"
)

// maxBody bounds every request body, proxied ones included.
const maxBody = 64 << 10

// Line is what the gateway needs of the line (package queue implements
// it): every feature's part together, as New takes it. No feature holds
// it whole: New hands each the part it uses, in the line's words (package
// line), each declared beside the feature that asks it.
type Line interface {
	Ping(ctx context.Context) error
	EdgeLine         // every feature, through the edge (edge.go)
	QueueLine        // join, status, leave (tickets.go)
	EventsLine       // the events' routes, the metrics (events.go)
	ViewsLine        // the pages' figures (look.go)
	AwayLine         // stepping away (away.go)
	PagesLine        // the fans' pages (pages.go)
	RoomLine         // the waiting room (pages.go)
	ReturnsLine      // the way back (forwardauth.go)
	TransparencyLine // the lottery and the report (transparency.go)
	ListsLine        // the published lists (transparency.go)
	OperatorsLine    // the operators' API (admin.go)
	gatekeeper.Line  // the gate's and forward auth's checks of a pass
	gatekeeper.Renewer
	GateLine        // the gate (gate.go)
	ForwardAuthLine // forward auth (forwardauth.go)
}

// EdgeLine is what every feature reads of the line through the edge: the
// settings the admitter published (events.go).
type EdgeLine interface {
	Settings(ctx context.Context, event string) (line.Settings, error)
}

// Operators is what the operators' API needs of their state (package
// operators).
type Operators interface {
	SetOverrides(ctx context.Context, event string, set map[string]operators.Override, clear []string) error
	Overrides(ctx context.Context, event string) (map[string]operators.Override, error)
	Auditor
	AuditLog(ctx context.Context, limit int) ([]operators.AuditEntry, error)
}

// Auditor is the operators' audit trail, as a route that changes
// something writes to it (audit).
type Auditor interface {
	Audit(ctx context.Context, e operators.AuditEntry) error
}

// Server is the gateway. Build it with New and serve App(). It holds the
// features, each a small type with what it needs (the edge every one
// reads, its part of the line), the app built from their routes, and the
// jobs that run beside them.
type Server struct {
	*edge
	line   Line
	signer *pass.Signer // the JWKS of its key
	proxy  *proxy       // to the booking core: the gate's and the wallets' credits
	// redis guards the gate's and forward auth's calls to the line (the
	// active set, the window a hold stretches): a Redis that does not
	// answer holds no fan for more than a second or two, and no one again
	// once the breaker gave up on it.
	redis *breaker.Breaker
	// keeper answers whether a pass's place is active, through redis,
	// and follows the line's ends (gatekeeper.Gatekeeper).
	keeper *gatekeeper.Gatekeeper

	guard atomic.Pointer[guard] // the events' protect rules, compiled; swapped on reload

	lists *publishedLists // the drawn lists this gateway served (transparency.go)

	views *views // the pages, in the events' looks (look.go)

	queue   *queueAPI  // join, status, leave (tickets.go)
	events  *eventsAPI // the events' routes (events.go)
	away    *awayAPI   // stepping away (away.go)
	returns *returns   // the way back to a site behind the room (forwardauth.go)
	pages   *pages     // the fans' pages (pages.go)
	room    *room      // the waiting room page (pages.go)

	sessions    *sessions    // a pass's place checked, for the gate and forward auth (session.go)
	forwardAuth *forwardAuth // forward auth (forwardauth.go)
	gate        *gate        // the gate to the booking API (gate.go)

	admin        *operatorsAPI  // the operators' API (admin*.go)
	opsPage      *operatorsPage // the operators' page and its previews (preview.go)
	presales     *presaleAPI    // the presale's routes and its register page (presale.go)
	codes        *accessCodes   // the access codes (presale.go)
	transparency *transparency  // the lottery's routes and the report (transparency.go)

	stop context.CancelFunc

	app *fiber.App
}

// Options are the gateway's dependencies.
type Options struct {
	Config *config.Config
	// ConfigPath is the file Reload re-reads ("" = no reloads).
	ConfigPath string
	Line       Line
	// Operators is the operators' state (overrides, the audit).
	Operators Operators
	// Webhooks is the webhooks' outbox (nil: none).
	Webhooks Webhooks
	// Presale is the presales' registrations and selections, and the
	// access codes (nil: events with a presale or codes answer 404
	// no_presale on its routes, and their joins are refused by the line).
	Presale Presale
	Signer  *pass.Signer
	// Accounts verifies the origin site's account tokens (nil = no
	// accounts).
	Accounts *account.Verifier
	Log      *slog.Logger
	Now      func() time.Time // nil = time.Now
}

// New builds the gateway and its routes.
func New(o Options) (*Server, error) {
	e := &edge{cfg: config.NewLive(o.ConfigPath, o.Config), line: o.Line, tickets: line.NewCodec([]byte(o.Config.Auth.TicketSecret)),
		log: o.Log, now: o.Now, accounts: o.Accounts, settings: map[string]line.Settings{}}
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{
		edge: e, line: o.Line, signer: o.Signer,
	}
	s.redis = gatekeeper.NewBreaker(o.Line.Ping, s.log)
	s.keeper = gatekeeper.New(gatekeeper.Options{
		Line: o.Line, Renewer: o.Line, Redis: s.redis, Service: "gateway", Log: s.log, Now: s.now,
		Sells: func(event string) bool {
			_, ok := s.config().Event(event)
			return ok
		},
		Events: func() []string {
			evs := s.config().Events
			ids := make([]string, len(evs))
			for i := range evs {
				ids[i] = evs[i].ID
			}
			return ids
		},
	})
	// The gateway verifies passes with its own key: no network hop.
	verifier := pass.NewStaticVerifier(o.Signer.PublicKey())
	verifier.Now = s.now // every pass is judged by the gateway's one clock
	p, err := newProxy(o.Config.Gateway.BookingURL, o.Config.Gateway.ProxyTimeout.D())
	if err != nil {
		return nil, err
	}
	s.proxy = p
	ps := proxiesOf(o.Config)
	s.proxies.Store(&ps)
	g := guardOf(o.Config)
	s.guard.Store(&g)
	s.views = &views{edge: e, line: o.Line}
	if s.views.pages, err = web.NewPages(); err != nil {
		return nil, err
	}
	if s.views.builtin, err = web.BuiltinLook(); err != nil {
		return nil, err
	}
	ls, err := s.views.loadLooks(o.Config, nil)
	if err != nil {
		return nil, err
	}
	s.views.looks.Store(&ls)
	s.opsPage = &operatorsPage{edge: e, views: s.views}
	s.lists = newPublishedLists(e, o.Line)
	s.presales = &presaleAPI{edge: e, presale: o.Presale, lists: s.lists, views: s.views}
	s.codes = &accessCodes{edge: e, presale: o.Presale, audit: o.Operators}
	s.transparency = &transparency{edge: e, line: o.Line, presale: o.Presale, lists: s.lists, views: s.views}
	s.returns = &returns{edge: e, line: o.Line, signer: o.Signer, guard: &s.guard}
	s.queue = &queueAPI{edge: e, line: o.Line, signer: o.Signer, proofs: proof.NewKeeper([]byte(o.Config.Auth.TicketSecret)),
		codes: s.codes, returns: s.returns}
	s.events = &eventsAPI{edge: e, line: o.Line}
	s.away = &awayAPI{edge: e, line: o.Line}
	s.pages = &pages{edge: e, line: o.Line, views: s.views, join: s.queue.join}
	s.room = &room{edge: e, line: o.Line, views: s.views, queue: s.queue, returns: s.returns, away: s.away}
	s.sessions = &sessions{edge: e, keeper: s.keeper}
	s.forwardAuth = &forwardAuth{edge: e, line: o.Line, signer: o.Signer, redis: s.redis, guard: &s.guard, sessions: s.sessions, returns: s.returns}
	s.forwardAuth.sitePasses, s.forwardAuth.returnVerifier = passVerifiers(o.Signer, s.now)
	s.gate = &gate{edge: e, line: o.Line, signer: o.Signer, verifier: verifier, proxy: s.proxy, redis: s.redis, sessions: s.sessions}
	s.admin = &operatorsAPI{edge: e, line: o.Line, ops: o.Operators, hooks: o.Webhooks, history: newHistory(historyEvery, historySpan),
		proxy: s.proxy}
	s.app = fiber.New(fiber.Config{
		AppName:               "waitroom-gateway",
		DisableStartupMessage: true,
		BodyLimit:             maxBody,
		ReadTimeout:           15 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           120 * time.Second,
		ReadBufferSize:        16 << 10,
		ErrorHandler:          s.errorHandler,
		// fiber's Hostname, Protocol, BaseURL and IP believe no forwarded
		// header: the gateway reads them itself, from its trusted proxies
		// only (clientaddr.go), and prints links with publicURL.
		EnableTrustedProxyCheck: true,
	})
	mount(s.app, s.routeTable())
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.refreshSettings(ctx)
	go s.keeper.Follow(ctx)
	go s.admin.sampleHistory(ctx)
	exportSeries(o.Config)
	return s, nil
}

// exportSeries exports every labelled series from the start, so dashboards
// show zeros and increase() sees the first event.
func exportSeries(cfg *config.Config) {
	for _, ev := range cfg.Events {
		ticketsIssued.WithLabelValues(ev.ID)
		straightThrough.WithLabelValues(ev.ID)
		waitSeconds.WithLabelValues(ev.ID)
		etaError.WithLabelValues(ev.ID)
		for _, r := range proofResults {
			joinProofs.WithLabelValues(ev.ID, r)
		}
		for _, r := range forwardAuthResults {
			forwardAuths.WithLabelValues(ev.ID, r)
		}
		if ev.Admission.Sliding() {
			passesReissued.WithLabelValues(ev.ID, "gate")
			passesReissued.WithLabelValues(ev.ID, "site")
		}
	}
	for _, r := range []string{"timeout", "unavailable"} {
		proxyErrors.WithLabelValues(r)
	}
}

// Watch follows the config file until ctx ends (see config.Live.Watch):
// events (added, removed, renamed, their showtimes, protect rules and page
// folders, read again), the per-IP join limit and the trusted proxies act
// at once; addresses, secrets, the signing key
// and the booking URL need a restart.
func (s *Server) Watch(ctx context.Context, hup <-chan os.Signal) {
	s.cfg.Watch(ctx, hup, s.log, s.applied)
}

func (s *Server) applied(old, cfg *config.Config) {
	s.log.Info("config reloaded", "path", s.cfg.Path(), "events", len(cfg.Events), "before", len(old.Events))
	exportSeries(cfg)
	ps := proxiesOf(cfg)
	s.proxies.Store(&ps)
	g := guardOf(cfg)
	s.guard.Store(&g)
	s.lists.keepOnly(cfg)
	s.loadSettings(context.Background())
	ls, _ := s.views.loadLooks(cfg, *s.views.looks.Load()) // a reload never fails: a refused folder keeps its pages
	s.views.looks.Store(&ls)
}

// App is the fiber application (for Listen, or app.Test in tests).
func (s *Server) App() *fiber.App { return s.app }

// Serve serves the gateway on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.app.Listener(ln) }

// Shutdown stops accepting and waits for in-flight requests until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.app.ShutdownWithContext(ctx)
	s.stop()
	s.proxy.close()
	return err
}

// lineTimeout bounds what a request of the line may wait for Redis: a
// master that died makes go-redis retry and redial for longer than a fan
// should wait, and the fan is better told 503 (and retries) at once.
const lineTimeout = 3 * time.Second

// lineBudget gives the request's Redis calls lineTimeout in all (up to
// budgetStep more). The requests that arrive within one budgetStep share
// one context: a context with a timer of its own per request was some 3 %
// of the gateway's CPU per poll (docs/EDGE.md).
func lineBudget(c *fiber.Ctx) error {
	if parent := c.UserContext(); parent != context.Background() {
		ctx, cancel := context.WithTimeout(parent, lineTimeout)
		defer cancel()
		c.SetUserContext(ctx)
	} else {
		c.SetUserContext(budgets.current())
	}
	return c.Next()
}

// budgetStep is how long one shared budget takes requests in.
const budgetStep = 100 * time.Millisecond

// budgets hands out the shared budget of the moment.
var budgets sharedBudget

type sharedBudget struct {
	mu  sync.Mutex
	cur atomic.Pointer[budget]
}

type budget struct {
	ctx   context.Context
	until time.Time // the last moment a request may still take it
}

func (b *sharedBudget) current() context.Context {
	now := time.Now() // the wall clock, as the budget's context deadline is
	if cur := b.cur.Load(); cur != nil && now.Before(cur.until) {
		return cur.ctx
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur := b.cur.Load(); cur != nil && now.Before(cur.until) {
		return cur.ctx
	}
	ctx, cancel := context.WithTimeout(context.Background(), lineTimeout+budgetStep)
	// The timer ends the context by itself; cancel is kept for vet and
	// dropped once the context is done.
	context.AfterFunc(ctx, cancel)
	b.cur.Store(&budget{ctx: ctx, until: now.Add(budgetStep)})
	return ctx
}

// Headers set on every answer, as bytes already in canonical form: Set
// would normalize each name on every request.
var (
	hdrNosniff      = [2][]byte{[]byte("X-Content-Type-Options"), []byte("nosniff")}
	hdrReferrer     = [2][]byte{[]byte("Referrer-Policy"), []byte("same-origin")}
	hdrCacheNoStore = [2][]byte{[]byte(fiber.HeaderCacheControl), []byte("no-store")}
)

func securityHeaders(c *fiber.Ctx) error {
	h := &c.Response().Header
	h.SetCanonical(hdrNosniff[0], hdrNosniff[1])
	h.SetCanonical(hdrReferrer[0], hdrReferrer[1])
	return c.Next()
}

// noStore marks an answer as never to be cached.
func noStore(c *fiber.Ctx) {
	c.Response().Header.SetCanonical(hdrCacheNoStore[0], hdrCacheNoStore[1])
}

func (s *Server) jwks(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, "application/jwk-set+json")
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.Send(s.signer.JWKS())
}

// Package gateway is the edge: the fan's pages, the queue API (join, status,
// leave, events), the JWKS of the access pass, and the gate, the only way in
// to the booking API, which lets a request through only with a valid pass
// whose ticket is still active.
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
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/breaker"
	"github.com/waitroom/waitroom/internal/platform/health"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/proof"
	"github.com/waitroom/waitroom/internal/queue"
)

// maxBody bounds every request body, proxied ones included.
const maxBody = 64 << 10

// Line is what the gateway needs of the line (package queue).
type Line interface {
	Ping(ctx context.Context) error
	CheckTicket(event, ticket string) error
	Enter(ctx context.Context, r queue.EnterRequest) (queue.Entry, error)
	Status(ctx context.Context, event, ticket string, set queue.Settings) (queue.Status, error)
	Leave(ctx context.Context, event, ticket string) error
	StepAway(ctx context.Context, r queue.AwayRequest) error
	Revoke(ctx context.Context, event, id string) error
	Active(ctx context.Context, event, ticket string) (bool, error)
	Extend(ctx context.Context, event, ticket string, until time.Time, window time.Duration) (time.Time, bool, error)
	Settings(ctx context.Context, event string) (queue.Settings, error)
	Counts(ctx context.Context, event string) (queue.Counts, error)
	Stats(ctx context.Context, event string) (queue.Stats, error)
	Report(ctx context.Context, event string) (queue.Report, error)
	Lottery(ctx context.Context, event string, set queue.Settings) (queue.Lottery, error)
	TicketDraw(ctx context.Context, event, ticket string) (queue.TicketDraw, error)
	LotteryEntries(ctx context.Context, event string, w io.Writer) error
	// The way back to a site behind the room, and its return tokens
	// (forwardauth.go).
	SetReturn(ctx context.Context, event, ticket, returnURL string, ttl time.Duration) error
	Return(ctx context.Context, event, id string) (string, error)
	SpendReturn(ctx context.Context, event, id, jti string, keep time.Duration) (until time.Time, active bool, err error)
}

// Operators is what the operators' API needs of their state (package
// operators).
type Operators interface {
	SetOverrides(ctx context.Context, event string, set map[string]operators.Override, clear []string) error
	Overrides(ctx context.Context, event string) (map[string]operators.Override, error)
	Audit(ctx context.Context, e operators.AuditEntry) error
	AuditLog(ctx context.Context, limit int) ([]operators.AuditEntry, error)
}

// Server is the gateway. Build it with New and serve App().
type Server struct {
	cfg      *config.Live // re-read from its file on change
	line     Line
	ops      Operators
	presale  Presale       // the presales and the access codes
	proofs   *proof.Keeper // the join challenges (proof.go)
	signer   *pass.Signer
	verifier *pass.Verifier
	accounts *account.Verifier // nil: no accounts (auth.account_keys_file empty)
	log      *slog.Logger
	now      func() time.Time
	proxy    *proxy
	// redis guards the gate's calls to the line (the active set, the
	// window a hold stretches): a Redis that does not answer holds no fan
	// for more than a second, and no one again while it stays silent.
	redis    *breaker.Breaker
	degraded prometheus.Counter // waitroom_gate_degraded_total{service="gateway"}

	proxies atomic.Pointer[proxies] // gateway.trusted_proxies, parsed; swapped on reload
	guard   atomic.Pointer[guard]   // the events' protect rules, compiled; swapped on reload

	// The site's pass (verified once per pass, then remembered) and the
	// return token of forward auth (forwardauth.go).
	sitePasses     *pass.Cache
	returnVerifier *pass.Verifier
	pages          *web.Pages // the fans' pages, rendered per request
	history        *history   // the operators' chart (history.go)

	settingsMu sync.RWMutex
	settings   map[string]queue.Settings
	stop       context.CancelFunc

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
	s := &Server{
		cfg: config.NewLive(o.ConfigPath, o.Config), line: o.Line, ops: o.Operators, presale: o.Presale, signer: o.Signer, accounts: o.Accounts, log: o.Log, now: o.Now,
		settings: map[string]queue.Settings{},
		history:  newHistory(historyEvery, historySpan),
		proofs:   proof.NewKeeper([]byte(o.Config.Auth.TicketSecret)),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.redis = queue.NewBreaker(o.Line.Ping, s.log)
	s.degraded = metrics.GateDegraded("gateway")
	// The gateway verifies passes with its own key: no network hop.
	s.verifier = pass.NewStaticVerifier(o.Signer.PublicKey())
	s.verifier.Now = s.now // every pass is judged by the gateway's one clock
	p, err := newProxy(o.Config.Gateway.BookingURL, o.Config.Gateway.ProxyTimeout.D())
	if err != nil {
		return nil, err
	}
	s.proxy = p
	ps := proxiesOf(o.Config)
	s.proxies.Store(&ps)
	g := guardOf(o.Config)
	s.guard.Store(&g)
	s.sitePasses, s.returnVerifier = passVerifiers(o.Signer, s.now)
	if s.pages, err = web.NewPages(); err != nil {
		return nil, err
	}
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
	s.routes()
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.refreshSettings(ctx)
	go s.sampleHistory(ctx)
	exportSeries(o.Config)
	return s, nil
}

// exportSeries exports every labelled series from the start, so dashboards
// show zeros and increase() sees the first event.
func exportSeries(cfg *config.Config) {
	for _, ev := range cfg.Events {
		ticketsIssued.WithLabelValues(ev.ID)
		waitSeconds.WithLabelValues(ev.ID)
		etaError.WithLabelValues(ev.ID)
		for _, r := range proofResults {
			joinProofs.WithLabelValues(ev.ID, r)
		}
		for _, r := range forwardAuthResults {
			forwardAuths.WithLabelValues(ev.ID, r)
		}
	}
	for _, r := range []string{"timeout", "unavailable"} {
		proxyErrors.WithLabelValues(r)
	}
}

// config is the config in force.
func (s *Server) config() *config.Config { return s.cfg.Load() }

// Watch follows the config file until ctx ends (see config.Live.Watch):
// events (added, removed, renamed, their showtimes and protect rules), the
// per-IP join limit and the trusted proxies act at once; addresses, secrets, the signing key
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
	s.loadSettings(context.Background())
}

// clientOf is the fan behind c, as the trusted proxies in force report it.
func (s *Server) clientOf(c *fiber.Ctx) client { return s.proxies.Load().clientOf(c) }

// secure reports whether the fan's connection is HTTPS (clientOf(c).secure).
func (s *Server) secure(c *fiber.Ctx) bool { return s.proxies.Load().secure(c) }

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

func (s *Server) routes() {
	a := s.app
	a.Use(securityHeaders)
	a.Use(metrics.Fiber("gateway"))

	a.Get("/healthz", adaptor.HTTPHandlerFunc(health.Live))
	a.Get("/readyz", adaptor.HTTPHandler(health.Ready(health.Check{Name: "redis", Ping: s.line.Ping})))
	a.Get("/metrics", adaptor.HTTPHandler(metrics.Handler()))
	a.Get("/.well-known/jwks.json", s.jwks)

	api := a.Group("/api/v1")
	api.All("/booking/*", s.gate)
	api.All("/forward-auth", lineBudget, s.forwardAuth)
	line := api.Group("/events", lineBudget)
	line.Get("", s.listEvents)
	line.Get("/:event", s.getEvent)
	line.Post("/:event/tickets", s.join)
	line.Get("/:event/tickets/:ticket", s.status)
	line.Delete("/:event/tickets/:ticket", s.leave)
	line.Post("/:event/tickets/:ticket/away", s.away)
	line.Get("/:event/lottery", s.lottery)
	line.Get("/:event/lottery/entries", s.lotteryEntries)
	line.Get("/:event/lottery/:ticket", s.ticketDraw)
	line.Get("/:event/report", s.report)
	s.presaleRoutes(line)
	s.adminRoutes(api)
	a.Get("/admin", s.adminPage)

	s.pageRoutes()
	// No catch-all: fiber then answers 404 or 405 itself, through errorHandler.
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
	now := time.Now()
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

package gateway

import (
	"context"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/platform/health"
	"github.com/waitroom/waitroom/internal/platform/metrics"
)

// Every route of the gateway is a row of routeTable: the one place routes
// are registered (net/http's ServeMux patterns are the model). mount
// builds the fiber app from it, row by row in its order (fiber matches in
// the order of registration, middleware rows included), and the OpenAPI
// document's test reads it: the rows marked api are exactly the document's
// operations (openapi_test.go). Another route is one more row.

// Methods of a row besides the HTTP ones.
const (
	// methodAll is a route for every method (fiber's All).
	methodAll = "ALL"
	// methodUse is middleware for every request whose path starts with
	// the row's (fiber's Use); its handlers are the row's use.
	methodUse = "USE"
)

// route is one row of the table.
type route struct {
	method string // fiber.MethodGet…, methodAll or methodUse
	path   string // fiber's pattern, from the root (:name a parameter, + or * the rest)
	// scope is an operators' route's scope (config.Scope…): needs(scope)
	// runs before the row's own middleware.
	scope  string
	use    []fiber.Handler // middleware, run before handle
	handle fiber.Handler
	// api marks a route described in the OpenAPI document
	// (/api/v1/openapi.json); the booking proxy's row stands for the
	// booking API's routes (booking.Routes).
	api bool
}

// routeTable is the gateway's routes, in the order they are matched.
func (s *Server) routeTable() []route {
	const (
		api    = "/api/v1"
		events = api + "/events"
		admin  = api + "/admin"
	)
	read, write := config.ScopeEventsRead, config.ScopeEventsWrite
	budget := []fiber.Handler{lineBudget}
	return []route{
		{method: methodUse, path: "/", use: []fiber.Handler{securityHeaders, metrics.Fiber("gateway")}},

		{method: fiber.MethodGet, path: "/healthz", handle: adaptor.HTTPHandlerFunc(health.Live)},
		{method: fiber.MethodGet, path: "/readyz", handle: adaptor.HTTPHandler(health.Ready(health.Check{Name: "redis", Ping: s.ping}))},
		{method: fiber.MethodGet, path: "/metrics", handle: adaptor.HTTPHandler(metrics.Handler())},
		{method: fiber.MethodGet, path: "/.well-known/jwks.json", handle: s.jwks},

		// The booking API, passed on behind the gate (gate.go).
		{method: methodAll, path: api + "/booking/*", handle: s.gate.serve, api: true},
		{method: methodAll, path: api + "/forward-auth", use: budget, handle: s.forwardAuth.ask, api: true},
		// This API's description (openapi.go).
		{method: fiber.MethodGet, path: api + "/openapi.json", handle: apiDocument, api: true},

		// The line: the fans' API.
		{method: methodUse, path: events, use: budget},
		{method: fiber.MethodGet, path: events, handle: s.events.listEvents, api: true},
		{method: fiber.MethodGet, path: events + "/:event", handle: s.events.getEvent, api: true},
		{method: fiber.MethodPost, path: events + "/:event/tickets", handle: s.queue.join, api: true},
		{method: fiber.MethodGet, path: events + "/:event/tickets/:ticket", handle: s.queue.status, api: true},
		{method: fiber.MethodDelete, path: events + "/:event/tickets/:ticket", handle: s.queue.leave, api: true},
		{method: fiber.MethodPost, path: events + "/:event/tickets/:ticket/away", handle: s.away.away, api: true},
		{method: fiber.MethodGet, path: events + "/:event/lottery", handle: s.transparency.lottery, api: true},
		{method: fiber.MethodGet, path: events + "/:event/lottery/entries", handle: s.transparency.lotteryEntries, api: true},
		{method: fiber.MethodGet, path: events + "/:event/lottery/:ticket", handle: s.transparency.ticketDraw, api: true},
		{method: fiber.MethodGet, path: events + "/:event/report", handle: s.transparency.report, api: true},
		// The presale (presale.go).
		{method: fiber.MethodPost, path: events + "/:event/registrations", handle: s.presales.register, api: true},
		{method: fiber.MethodGet, path: events + "/:event/registrations/me", handle: s.presales.registration, api: true},
		{method: fiber.MethodDelete, path: events + "/:event/registrations/me", handle: s.presales.withdraw, api: true},
		{method: fiber.MethodGet, path: events + "/:event/selection", handle: s.presales.selection, api: true},
		{method: fiber.MethodGet, path: events + "/:event/selection/entries", handle: s.presales.selectionEntries, api: true},

		// The operators' API (admin.go): every request under it passes
		// requireOperator, then each route its scope (a route with :event
		// needs the event covered too: admin_auth.go).
		{method: methodUse, path: admin, use: []fiber.Handler{s.admin.requireOperator, lineBudget, adminNoStore}},
		{method: fiber.MethodGet, path: admin + "/events", scope: read, handle: s.admin.events, api: true},
		{method: fiber.MethodPatch, path: admin + "/events/:event", scope: write, handle: s.admin.patch, api: true},
		{method: fiber.MethodDelete, path: admin + "/events/:event/tickets/:ticket", scope: config.ScopeTicketsEnd, handle: s.admin.revoke, api: true},
		{method: fiber.MethodGet, path: admin + "/events/:event/history", scope: read, handle: s.admin.chart, api: true},
		{method: fiber.MethodGet, path: admin + "/events/:event/preview", scope: read, handle: s.opsPage.preview, api: true},
		{method: fiber.MethodGet, path: admin + "/audit", scope: read, handle: s.admin.audit, api: true},
		{method: fiber.MethodPost, path: admin + "/wallets/:account/credits", scope: config.ScopeWalletsWrite, handle: s.admin.credit, api: true},
		{method: fiber.MethodPost, path: admin + "/events/:event/codes", scope: config.ScopeCodesWrite, handle: s.codes.add, api: true},
		// The codes' counts are a read (how many, never which).
		{method: fiber.MethodGet, path: admin + "/events/:event/codes", scope: read, handle: s.codes.counts, api: true},
		{method: fiber.MethodGet, path: admin + "/webhooks/deliveries", scope: config.ScopeWebhooksRead, handle: s.admin.deliveries, api: true},
		{method: fiber.MethodGet, path: "/admin", handle: s.opsPage.page},

		// The fans' pages (pages.go).
		{method: fiber.MethodGet, path: "/", use: budget, handle: s.views.page(s.pages.indexPage)},
		{method: fiber.MethodGet, path: "/e/:event", use: budget, handle: s.views.page(s.room.roomPage)},
		{method: fiber.MethodGet, path: "/e/:event/book", use: budget, handle: s.views.page(s.pages.bookPage)},
		{method: fiber.MethodGet, path: "/e/:event/leave", use: budget, handle: s.views.page(s.pages.leavePage)},
		{method: fiber.MethodGet, path: "/e/:event/report", use: budget, handle: s.views.page(s.transparency.reportPage)},
		{method: fiber.MethodGet, path: "/e/:event/qr.svg", handle: s.pages.qrCode},
		{method: fiber.MethodPost, path: "/e/:event/join", use: budget, handle: s.pages.joinForm},
		{method: fiber.MethodPost, path: "/e/:event/leave", use: budget, handle: s.pages.leaveForm},
		{method: fiber.MethodPost, path: "/e/:event/away", use: budget, handle: s.away.awayForm},
		{method: fiber.MethodPost, path: "/e/:event/move", handle: s.room.moveForm},
		{method: fiber.MethodGet, path: "/e/:event/register", use: budget, handle: s.views.page(s.presales.registerPage)},
		{method: fiber.MethodGet, path: "/e/:event/assets/+", handle: s.views.asset},
		{method: fiber.MethodPost, path: "/e/:event/register", use: budget, handle: s.presales.registerForm},
		{method: fiber.MethodGet, path: "/static/+", handle: serveFiles(web.FS())},
		// The SDK for apps (DESIGN.md, "Integrations"): the module the
		// room's own page imports too, and its types.
		{method: fiber.MethodGet, path: "/sdk/+", handle: serveFiles(web.SDK())},
		// No catch-all: fiber then answers 404 or 405 itself, through
		// errorHandler.
	}
}

// mount registers rt on app, in its order.
func mount(app *fiber.App, rt []route) {
	for _, r := range rt {
		if r.method == methodUse {
			args := []any{r.path}
			for _, h := range r.use {
				args = append(args, h)
			}
			app.Use(args...)
			continue
		}
		var hs []fiber.Handler
		if r.scope != "" {
			hs = append(hs, needs(r.scope))
		}
		hs = append(append(hs, r.use...), r.handle)
		switch r.method {
		case methodAll:
			app.All(r.path, hs...)
		case fiber.MethodGet:
			app.Get(r.path, hs...) // HEAD too, as fiber's Get does
		default:
			app.Add(r.method, r.path, hs...)
		}
	}
}

// ping is /readyz's check: Redis reachable. (A method, not s.line.Ping,
// so the table can be read off a Server without a line: the tests'.)
func (s *Server) ping(ctx context.Context) error { return s.line.Ping(ctx) }

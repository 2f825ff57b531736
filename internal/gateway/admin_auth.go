package gateway

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/pass"
)

// Who may use the operators' API (DESIGN.md, "Operators' tokens"):
// auth.admin_token may do everything; each of auth.tokens what its scopes
// say, on its events. requireOperator finds the bearer's grant (401 when
// none), needs checks a route's scope and event (403 forbidden, naming
// the scope). Every answer past requireOperator says what its token may
// do, in three headers the operators' page reads (a token's own powers,
// never anyone else's):
//
//	X-Waitroom-Token-Name:   ops-bot
//	X-Waitroom-Token-Scopes: events:read tickets:end
//	X-Waitroom-Token-Events: premiere        ("*" = every event)

// The headers that tell a token what it may do.
const (
	headerTokenName   = "X-Waitroom-Token-Name"
	headerTokenScopes = "X-Waitroom-Token-Scopes"
	headerTokenEvents = "X-Waitroom-Token-Events"
)

// localGrant and localBearer are where requireOperator leaves the grant
// and the token for the route.
const (
	localGrant  = "waitroom.grant"
	localBearer = "waitroom.bearer"
)

// requireOperator lets a request through only with Authorization: Bearer
// <token> of a token the config grants (config.Auth.Bearer: hashed, then
// compared in constant time with every hash, so not even a token's length
// leaks). While no token is configured the API is off and answers 404 as
// if it were not there.
func (s *operatorsAPI) requireOperator(c *fiber.Ctx) error {
	auth := &s.config().Auth
	if !auth.OperatorsOn() {
		return errNotFound
	}
	token, ok := pass.Bearer(c.Get(fiber.HeaderAuthorization))
	if !ok {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="waitroom-admin"`)
		return errUnauthorized
	}
	g, ok := auth.Bearer(token)
	if !ok {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="waitroom-admin", error="invalid_token"`)
		return errUnauthorized
	}
	c.Locals(localGrant, g)
	c.Locals(localBearer, utils.CopyString(token))
	tellGrant(c)
	return c.Next()
}

// tellGrant writes the headers that say what the request's token may do
// (again after a proxied answer replaced them).
func tellGrant(c *fiber.Ctx) {
	g := grantOf(c)
	events := "*"
	if g.Events != nil {
		events = strings.Join(g.Events, " ")
	}
	c.Set(headerTokenName, g.Name)
	c.Set(headerTokenScopes, strings.Join(g.Scopes, " "))
	c.Set(headerTokenEvents, events)
}

// needs is a route's guard: the grant must hold scope, and reach the
// route's event (its :event), or every event on a route of none that
// writes (a wallet's credit). Reads across events (the events, the audit,
// the deliveries) answer what the grant's events cover instead.
func needs(scope string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		g := grantOf(c)
		if !g.Allows(scope) {
			return forbidden("this token (" + g.Name + ") lacks the scope " + scope)
		}
		event, crossEvent := c.Params("event"), scope == config.ScopeWalletsWrite
		if (event != "" || crossEvent) && !g.Covers(event) {
			what := "event " + event
			if event == "" {
				what = "a route of no event"
			}
			return forbidden("this token (" + g.Name + ") holds " + scope + " for " + strings.Join(g.Events, ", ") + " only, not " + what)
		}
		return c.Next()
	}
}

// forbidden is 403 forbidden with its reason.
func forbidden(message string) *apiError {
	return &apiError{Status: fiber.StatusForbidden, Code: "forbidden", Message: message}
}

// grantOf is the grant requireOperator found for the request.
func grantOf(c *fiber.Ctx) config.Grant {
	g, _ := c.Locals(localGrant).(config.Grant)
	return g
}

// bearerOf is the operator's token itself (for the booking core, which
// judges it again).
func bearerOf(c *fiber.Ctx) string {
	t, _ := c.Locals(localBearer).(string)
	return t
}

package gateway

import (
	"crypto/subtle"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/waitroom/waitroom/internal/account"
)

// The operators' credit of an account's points (DESIGN.md, Operators'
// API): POST /api/v1/admin/wallets/{account}/credits, body
// {"points","reference"} → 201 {"balance"}, the same reference crediting
// once. The wallet lives in the booking core, which does the credit (its
// /api/v1/booking/admin/… routes, guarded by the same token); the gateway
// checks the operator's token and forwards. The rest of the operators'
// API has its own group and middleware; adminGuard here is the credit's
// own until the two meet.

var errAdminToken = &apiError{Status: fiber.StatusUnauthorized, Code: "unauthorized", Message: "operator token required"}

// adminGuard lets a request through only with Authorization: Bearer
// <auth.admin_token>, compared in constant time; while the token is empty
// the operators' API is off (404, as if it did not exist).
func (s *Server) adminGuard(c *fiber.Ctx) error {
	want := s.config().Auth.AdminToken
	if want == "" {
		return errNotFound
	}
	got, h := "", c.Get(fiber.HeaderAuthorization)
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		got = strings.TrimSpace(h[7:])
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errAdminToken
	}
	return c.Next()
}

// creditWallet forwards the credit to the booking core, with the
// operators' token, and answers what it answers.
func (s *Server) creditWallet(c *fiber.Ctx) error {
	acct := utils.CopyString(c.Params("account"))
	if !account.ValidID(acct) {
		return &apiError{Status: fiber.StatusBadRequest, Code: "invalid_request", Message: "account id must be 1..64 of [A-Za-z0-9._:@+-]"}
	}
	c.Request().SetRequestURI(bookingPrefix + "/admin/wallets/" + acct + "/credits")
	return s.proxy.forward(c, s.config().Auth.AdminToken, s.clientOf(c).addr.String())
}

func (s *Server) adminWalletRoutes(api fiber.Router) {
	api.Post("/admin/wallets/:account/credits", s.adminGuard, s.creditWallet)
}

package gateway

import (
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/waitroom/waitroom/internal/account"
)

// The operators' credit of an account's points (DESIGN.md, Operators'
// API): POST /api/v1/admin/wallets/{account}/credits, body
// {"points","reference"} → 201 {"balance"}, the same reference crediting
// once. The wallet lives in the booking core, which does the credit (its
// /api/v1/booking/admin/… routes, guarded by the same token); the gateway
// checks the operator's token (requireAdmin, on the operators' group) and
// forwards.

// creditWallet forwards the credit to the booking core, with the
// operators' token, and answers what it answers.
func (s *Server) creditWallet(c *fiber.Ctx) error {
	acct := utils.CopyString(c.Params("account"))
	if !account.ValidID(acct) {
		return &apiError{Status: fiber.StatusBadRequest, Code: "invalid_request", Message: "account id must be 1..64 of [A-Za-z0-9._:@+-]"}
	}
	c.Request().SetRequestURI(bookingPrefix + "/admin/wallets/" + acct + "/credits")
	return s.proxy.forward(c, s.config().Auth.AdminToken, s.clientOf(c))
}

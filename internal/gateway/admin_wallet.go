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
// /api/v1/booking/admin/… routes, which judge the same token by the same
// config); the gateway checks the operator's token and its scope
// (requireOperator and needs, on the operators' group) and forwards it.

// credit forwards the credit to the booking core, with the
// operator's own token, and answers what it answers.
func (s *operatorsAPI) credit(c *fiber.Ctx) error {
	acct := utils.CopyString(c.Params("account"))
	if !account.ValidID(acct) {
		return &apiError{Status: fiber.StatusBadRequest, Code: "invalid_request", Message: "account id must be 1..64 of [A-Za-z0-9._:@+-]"}
	}
	c.Request().SetRequestURI(bookingPrefix + "/admin/wallets/" + acct + "/credits")
	err := s.proxy.forward(c, bearerOf(c), s.clientOf(c))
	tellGrant(c)
	return err
}

package gateway

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/config"
)

// accountOf is the verified account a join brings (header
// X-Waitroom-Account, else cookie wr_u), or "" for none. A token that does
// not verify is always 401 invalid_account; no token where the event asks
// one is 401 account_required. Without auth.account_keys_file there are no
// accounts: tokens are ignored, as a cookie of the origin site may be there
// for its own reasons.
func (s *edge) accountOf(c *fiber.Ctx, ev *config.Event) (string, error) {
	claims, err := s.accountClaims(c, ev)
	if err == nil && claims.Account == "" && ev.Admission.AccountsRequired() {
		return "", errAccountRequired
	}
	return claims.Account, err
}

// accountClaims is what the verified account token a request brings says
// (header X-Waitroom-Account, else cookie wr_u): nothing (no error) with
// no token or no accounts; 401 invalid_account for a token that does not
// verify.
func (s *edge) accountClaims(c *fiber.Ctx, ev *config.Event) (account.Claims, error) {
	if s.accounts == nil {
		return account.Claims{}, nil
	}
	tok := c.Get(accountHeader)
	if tok == "" {
		tok = c.Cookies(accountCookie)
	}
	if tok == "" {
		return account.Claims{}, nil
	}
	claims, err := s.accounts.Verify(tok, ev.ID)
	if err != nil {
		if !errors.Is(err, account.ErrInvalid) {
			return account.Claims{}, err
		}
		s.log.Info("account token refused", "event", ev.ID, "reason", err)
		return account.Claims{}, errInvalidAccount
	}
	return claims, nil
}

package gateway

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waitroom/waitroom/internal/account"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
)

// edge is what every feature of the gateway reads, and nothing else: the
// config in force, the route's event and the events' settings in force
// (events.go), the clock, the log, and who the fan is: its address and
// host as the trusted proxies report them (clientaddr.go, publicurl.go),
// its account as its token says (accounts.go), its ticket as it brings it
// (tickets.go: checked here, once, and handed to the line parsed); and the
// cookies every feature sets. Each feature
// type embeds the one edge New builds, so that its handlers say
// s.config(), s.event(c), s.now() as the server's did; what a feature
// needs beyond it (its part of the line, the signer, another feature) is
// a field of its own. Its receivers, like every feature's, are named s:
// the handlers were moved from the server by their receivers alone.
type edge struct {
	cfg  *config.Live // re-read from its file on change
	line EdgeLine     // the settings the admitter published
	// tickets checks the fans' tickets (auth.ticket_secret, as the line
	// signs them): a ticket is checked once, where it comes in, and the
	// line takes the line.Ticket parsed and never checks it again.
	tickets *line.Codec
	log     *slog.Logger
	now     func() time.Time
	// accounts verifies the origin site's account tokens (accounts.go; nil:
	// no accounts, auth.account_keys_file empty).
	accounts *account.Verifier

	proxies atomic.Pointer[proxies] // gateway.trusted_proxies, parsed; swapped on reload

	settingsMu sync.RWMutex
	settings   map[string]line.Settings
}

// config is the config in force.
func (s *edge) config() *config.Config { return s.cfg.Load() }

// clientOf is the fan behind c, as the trusted proxies in force report it.
func (s *edge) clientOf(c *fiber.Ctx) client { return s.proxies.Load().clientOf(c) }

// secure reports whether the fan's connection is HTTPS (clientOf(c).secure).
func (s *edge) secure(c *fiber.Ctx) bool { return s.proxies.Load().secure(c) }

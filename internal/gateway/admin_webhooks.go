package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/webhook"
)

// Webhooks is what the operators' API needs of the webhooks' outbox
// (package webhook): it queues settings.changed for an operator's PATCH,
// and reads the delivery log.
type Webhooks interface {
	Enqueue(ctx context.Context, eps []webhook.Endpoint, m webhook.Moment) (int, error)
	Deliveries(ctx context.Context, events []string, urls map[string]string, limit int) ([]webhook.Delivery, error)
}

// maxDeliveries is the most deliveries one GET of the log returns.
const maxDeliveries = 1000

// GET /api/v1/admin/webhooks/deliveries?limit=N (default 100): the latest
// deliveries of the events the token covers, latest first.
func (s *operatorsAPI) deliveries(c *fiber.Ctx) error {
	limit, err := limitOf(c, maxDeliveries)
	if err != nil {
		return err
	}
	cfg, g := s.config(), grantOf(c)
	var events []string
	for _, ev := range cfg.Events {
		if g.Covers(ev.ID) {
			events = append(events, ev.ID)
		}
	}
	out := []webhook.Delivery{}
	if s.hooks != nil && len(events) > 0 {
		d, err := s.hooks.Deliveries(c.UserContext(), events, policy.EndpointURLs(cfg), limit)
		if err != nil {
			return err
		}
		out = append(out, d...)
	}
	return c.JSON(fiber.Map{"deliveries": out})
}

// settingsChanged queues settings.changed for an operator's PATCH of ev:
// each setting it named, from the value in force before to the one in
// force now, and who (the token's name). A failure is logged: the change
// is made and audited all the same.
func (s *operatorsAPI) settingsChanged(c *fiber.Ctx, ev *config.Event, before, after line.Settings, fields []string) {
	cfg := s.config()
	if s.hooks == nil || len(cfg.Webhooks) == 0 || len(fields) == 0 {
		return
	}
	changes := map[string]webhook.Change{}
	for _, f := range fields {
		changes[f] = webhook.Change{From: settingOf(before, f), To: settingOf(after, f)}
	}
	by := grantOf(c).Name
	m := webhook.Moment{Type: webhook.SettingsChanged, Event: ev.ID, Data: webhook.SettingsData{Changes: changes, By: by},
		Key: fmt.Sprintf("%s %d %s", by, s.now().UnixNano(), strings.Join(slices.Sorted(slices.Values(fields)), ","))}
	if _, err := s.hooks.Enqueue(c.UserContext(), policy.Endpoints(cfg), m); err != nil {
		s.log.Warn("webhooks: settings.changed not queued", "event", ev.ID, "by", by, "err", err)
	}
}

// settingOf is one overridable setting of set, as the API writes it.
func settingOf(set line.Settings, f string) any {
	switch f {
	case operators.FieldMode:
		return set.Mode
	case operators.FieldAdmitPerSecond:
		return displayRate(set.AdmitPerSecond)
	}
	return set.MaxActive
}

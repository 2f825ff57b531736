package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/webhook"
)

// Webhooks is what the admitter needs of the webhooks' outbox (package
// webhook): it sees the settings in force, the inventory, the adaptive
// rate and the draws at every tick, so it is where their moments are
// noticed.
type Webhooks interface {
	// Observe makes the moments of what moved since the last look (once,
	// whoever else looks).
	Observe(ctx context.Context, eps []webhook.Endpoint, v webhook.View) ([]string, error)
	// Reconfigure announces an event's config values (settings.changed by
	// config, once per edit whoever reloads it).
	Reconfigure(ctx context.Context, eps []webhook.Endpoint, event string, values map[string]any) error
	// Forget lets receivers that answered 410 Gone receive again.
	Forget(ctx context.Context, identities []string) error
}

// announce tells the outbox what this tick saw of ev (set: the settings
// then in force). Its failure is logged and costs the tick nothing: the
// next tick looks again, and the moment is made then.
func (a *Admitter) announce(ctx context.Context, cfg *config.Config, ev config.Event, set line.Settings) {
	if a.hooks == nil || len(cfg.Webhooks) == 0 {
		return
	}
	eps := policy.Endpoints(cfg)
	values := policy.Values(ev)
	// The config's values are announced once per process and edit: at the
	// first tick, and at the first after a reload that changed them. An
	// admitter that has not reloaded yet announces nothing of the edit,
	// and its looks are fenced off until it has (Observe).
	fence, _ := json.Marshal(values)
	if last, _ := a.announced.Load(ev.ID); last != string(fence) {
		if err := a.hooks.Reconfigure(ctx, eps, ev.ID, values); err != nil {
			a.log.Warn("webhooks: reconfigure", "event", ev.ID, "err", err)
			return
		}
		a.announced.Store(ev.ID, string(fence))
	}
	v := webhook.View{Event: ev.ID, Values: values, Mode: ev.Mode, OpensAt: set.OpensAt, ClosesAt: set.ClosesAt, Adaptive: ev.Admission.Adaptive}
	lottery, selection := a.draws(ctx, ev, set)
	if lottery != nil {
		v.Lottery = lottery
	}
	if selection != nil {
		v.Selection = selection
	}
	made, err := a.hooks.Observe(ctx, eps, v)
	if err != nil {
		a.log.Warn("webhooks: observe", "event", ev.ID, "err", err)
		return
	}
	// A draw announced (by this look or another's) needs no more reading.
	if lottery != nil {
		a.drawsSeen.Store("lottery/"+ev.ID, true)
	}
	if selection != nil {
		a.drawsSeen.Store("selection/"+ev.ID, true)
	}
	if len(made) > 0 {
		a.log.Info("webhooks: moments", "event", ev.ID, "types", made)
	}
}

// drawData is lottery.drawn's and selection.drawn's data: the published
// draw, enough to check it (DESIGN.md, "Transparency"), and where its
// entries are.
type drawData struct {
	Commitment    string    `json:"commitment"`
	Seed          string    `json:"seed"`
	Nonce         string    `json:"nonce"`
	Entries       int64     `json:"entries"`
	EntriesDigest string    `json:"entriesDigest"`
	DrawnAt       time.Time `json:"drawnAt"`
	EntriesPath   string    `json:"entriesPath"`
}

func drawDataOf(p line.Draw, path string) *drawData {
	return &drawData{Commitment: p.Commitment, Seed: p.Seed, Nonce: p.Nonce, Entries: p.Entries, EntriesDigest: p.EntriesDigest, DrawnAt: p.DrawnAt.UTC(), EntriesPath: path}
}

// draws reads the event's lottery and presale selection once they may be
// published (from opens_at, from the registration's close) until one look
// announced them: nil for each not (yet) drawn.
func (a *Admitter) draws(ctx context.Context, ev config.Event, set line.Settings) (lottery, selection *drawData) {
	now := a.now()
	if _, seen := a.drawsSeen.Load("lottery/" + ev.ID); !seen && ev.PrequeueOpensAt != nil && set.OpensAt != nil && !now.Before(*set.OpensAt) {
		if l, err := a.line.Lottery(ctx, ev.ID, set); err == nil && l.Drawn {
			lottery = drawDataOf(l, fmt.Sprintf("/api/v1/events/%s/lottery/entries", ev.ID))
		}
	}
	if p := ev.Presale; p != nil && a.presale != nil && p.RegistrationClosesAt != nil && !now.Before(*p.RegistrationClosesAt) {
		if _, seen := a.drawsSeen.Load("selection/" + ev.ID); !seen {
			if s, err := a.presale.Selection(ctx, ev.ID, policy.PlanFor(ev)); err == nil && s.Drawn {
				selection = drawDataOf(s, fmt.Sprintf("/api/v1/events/%s/selection/entries", ev.ID))
			}
		}
	}
	return lottery, selection
}

// forgetGone lets the receivers a reload stopped naming (or names
// otherwise) receive again once named again: their 410 Gone marks go.
func (a *Admitter) forgetGone(old, cur *config.Config) {
	if a.hooks == nil {
		return
	}
	now := map[string]bool{}
	for _, e := range policy.Endpoints(cur) {
		now[e.Identity()] = true
	}
	var gone []string
	for _, e := range policy.Endpoints(old) {
		if !now[e.Identity()] {
			gone = append(gone, e.Identity())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := a.hooks.Forget(ctx, gone); err != nil {
		a.log.Warn("webhooks: forget", "err", err)
	}
}

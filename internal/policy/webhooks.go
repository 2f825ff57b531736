package policy

import (
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/webhook"
)

// Endpoints are the webhooks' receivers the config names.
func Endpoints(cfg *config.Config) []webhook.Endpoint {
	out := make([]webhook.Endpoint, len(cfg.Webhooks))
	for i, w := range cfg.Webhooks {
		out[i] = webhook.Endpoint{URL: w.URL, Key: w.Key(), Types: w.Types}
	}
	return out
}

// EndpointURLs maps each receiver's id to its URL (the delivery log's).
func EndpointURLs(cfg *config.Config) map[string]string {
	out := make(map[string]string, len(cfg.Webhooks))
	for _, e := range Endpoints(cfg) {
		out[e.ID()] = e.URL
	}
	return out
}

// Values are what settings.changed tells of an event's config when a
// reload changes it, by the API's names: the settings the config puts in
// force (after the capacity model), its times and its adaptive flag.
func Values(ev config.Event) map[string]any {
	set := SettingsFor(ev)
	at := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return t.UTC().Format(time.RFC3339)
	}
	return map[string]any{
		"mode":            set.Mode,
		"admitPerSecond":  set.AdmitPerSecond,
		"maxActive":       set.MaxActive,
		"accessTtl":       set.AccessTTL.String(),
		"abandonAfter":    set.AbandonAfter.String(),
		"adaptive":        ev.Admission.Adaptive,
		"prequeueOpensAt": at(set.PrequeueOpensAt),
		"opensAt":         at(set.OpensAt),
		"closesAt":        at(set.ClosesAt),
	}
}

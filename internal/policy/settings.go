package policy

import (
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/queue"
)

// SettingsFor is what an event's config puts in force: the rate and cap are
// computed from the capacity model when not given. The admitter publishes
// it; the gateway falls back on it until an admitter has.
func SettingsFor(ev config.Event) queue.Settings {
	return queue.Settings{
		Mode:            ev.Mode,
		AdmitPerSecond:  Rate(ev.Admission),
		MaxActive:       Cap(ev.Admission),
		AccessTTL:       ev.Admission.AccessTTL.D(),
		AbandonAfter:    ev.Admission.AbandonAfter.D(),
		PrequeueOpensAt: ev.PrequeueOpensAt,
		OpensAt:         ev.OpensAt,
		ClosesAt:        ev.ClosesAt,
		Shards:          max(ev.Admission.Shards, 1),
	}
}

package queue

import (
	"time"

	"github.com/waitroom/waitroom/internal/config"
)

// SettingsFor is what an event's config puts in force: the rate and cap are
// computed from the capacity model when not given. The admitter publishes
// it; the gateway falls back on it until an admitter has.
func SettingsFor(ev config.Event) Settings {
	return Settings{
		Mode:            ev.Mode,
		AdmitPerSecond:  ev.Admission.Rate(),
		MaxActive:       ev.Admission.Cap(),
		AccessTTL:       ev.Admission.AccessTTL.D(),
		AbandonAfter:    ev.Admission.AbandonAfter.D(),
		PrequeueOpensAt: ev.PrequeueOpensAt,
		OpensAt:         ev.OpensAt,
		ClosesAt:        ev.ClosesAt,
	}
}

// Admitting reports whether the settings let anyone in at t: not paused or
// closed, and inside the open window.
func (s Settings) Admitting(t time.Time) bool {
	switch {
	case s.Mode == config.ModePaused || s.Mode == config.ModeClosed:
		return false
	case s.OpensAt != nil && t.Before(*s.OpensAt):
		return false
	case s.ClosesAt != nil && !t.Before(*s.ClosesAt):
		return false
	}
	return true
}

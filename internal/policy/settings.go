package policy

import (
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/presale"
)

// SettingsFor is what an event's config puts in force: the rate and cap are
// computed from the capacity model when not given. The admitter publishes
// it; the gateway falls back on it until an admitter has.
func SettingsFor(ev config.Event) line.Settings {
	return line.Settings{
		Mode:            ev.Mode,
		AdmitPerSecond:  Rate(ev.Admission),
		MaxActive:       Cap(ev.Admission),
		AccessTTL:       ev.Admission.AccessTTL.D(),
		AbandonAfter:    ev.Admission.AbandonAfter.D(),
		AwayClaimWithin: ev.Admission.AwayClaimWithin.D(),
		PrequeueOpensAt: ev.PrequeueOpensAt,
		OpensAt:         ev.OpensAt,
		ClosesAt:        ev.ClosesAt,
		Shards:          max(ev.Admission.Shards, 1),
		Presale:         ev.Presale != nil,
		GeneralSaleAt:   generalSaleAt(ev),
		Codes:           ev.Admission.CodesRequired(),
	}
}

func generalSaleAt(ev config.Event) *time.Time {
	if ev.Presale == nil {
		return nil
	}
	return ev.Presale.GeneralSaleAt.At
}

// PlanFor is an event's presale as the presale takes it (zero when the
// event has none: check ev.Presale).
func PlanFor(ev config.Event) presale.Plan {
	p := ev.Presale
	if p == nil {
		return presale.Plan{}
	}
	out := presale.Plan{Selected: p.Selected, GroupSize: p.GroupSize, Window: p.Window.D(), GeneralSaleAt: p.GeneralSaleAt.At}
	if p.RegistrationOpensAt != nil {
		out.RegistrationOpensAt = *p.RegistrationOpensAt
	}
	if p.RegistrationClosesAt != nil {
		out.RegistrationClosesAt = *p.RegistrationClosesAt
	}
	if ev.OpensAt != nil {
		out.OpensAt = *ev.OpensAt
	}
	return out
}

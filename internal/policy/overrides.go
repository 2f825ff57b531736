package policy

import (
	"strconv"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/operators"
)

// Sources of a setting (GET /api/v1/admin/events) and of an audit entry.
const (
	SourceConfig   = "config"
	SourceAPI      = "api"
	SourceAdaptive = "adaptive"
)

// Fields are the settings an operator may override, in the API's names.
var Fields = []string{operators.FieldMode, operators.FieldAdmitPerSecond, operators.FieldMaxActive}

// ConfigValues are the values the config in force gives the overridable
// settings of ev, as an override's Base records them: an override made
// over one value gives way once the config gives another.
func ConfigValues(ev config.Event) map[string]string {
	set := SettingsFor(ev)
	return map[string]string{
		operators.FieldMode:           set.Mode,
		operators.FieldAdmitPerSecond: FormatRate(set.AdmitPerSecond),
		operators.FieldMaxActive:      strconv.Itoa(set.MaxActive),
	}
}

// FormatRate writes a rate as overrides and the audit keep it: seven
// digits (a computed 166.666… reads 166.6667; 1000000, the largest, needs
// no exponent).
func FormatRate(r float64) string { return strconv.FormatFloat(r, 'g', 7, 64) }

// Overlay puts the overrides in force on set (the config's settings) and
// says where each overridable setting comes from. An override whose Base is
// not the config's value any more is skipped: the config wins (the
// admitter drops it, see Admitter.overlay).
func Overlay(ev config.Event, set line.Settings, ovs map[string]operators.Override) line.Settings {
	cur := ConfigValues(ev)
	set.Sources = map[string]string{}
	for _, f := range Fields {
		set.Sources[f] = SourceConfig
		o, ok := ovs[f]
		if !ok || o.Base != cur[f] {
			continue
		}
		switch f {
		case operators.FieldMode:
			set.Mode = o.Value
		case operators.FieldAdmitPerSecond:
			v, err := strconv.ParseFloat(o.Value, 64)
			if err != nil || !(v > 0) {
				continue
			}
			set.AdmitPerSecond = v
		case operators.FieldMaxActive:
			v, err := strconv.Atoi(o.Value)
			if err != nil || v < 1 {
				continue
			}
			set.MaxActive = v
		}
		set.Sources[f] = SourceAPI
	}
	return set
}

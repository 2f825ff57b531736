package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/policy"
)

// The operators' API (DESIGN.md "Operators' API"): every route of it is a
// row of routeTable under /api/v1/admin, behind requireOperator, each with
// the scope it needs (admin_auth.go). Another operators' route is one row.

// OperatorsLine is what the operators' API asks of the line: its figures
// and the revoking of a place.
type OperatorsLine interface {
	Counts(ctx context.Context, event string) (line.Counts, error)
	Stats(ctx context.Context, event string) (line.Stats, error)
	Revoke(ctx context.Context, event, id string) error
}

// operatorsAPI is the operators' API and their page: what they change
// (the overrides, a revoked place), what they read (the events' figures,
// the audit, the chart this gateway samples, the webhooks' deliveries),
// and the wallets' credits passed on to the booking core.
type operatorsAPI struct {
	*edge
	line    OperatorsLine
	ops     Operators
	hooks   Webhooks // nil: no webhooks' outbox (no settings.changed, an empty delivery log)
	history *history // the operators' chart (history.go)
	proxy   *proxy   // to the booking core, for the wallets' credits (admin_wallet.go)
}

// invalidField is 400 invalid_request naming the field at fault.
func invalidField(field, format string, args ...any) *apiError {
	return &apiError{Status: fiber.StatusBadRequest, Code: "invalid_request", Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

func adminNoStore(c *fiber.Ctx) error {
	noStore(c)
	return c.Next()
}

// adminSettings are an event's settings in force with their sources.
type adminSettings struct {
	Mode           string            `json:"mode"`
	AdmitPerSecond float64           `json:"admitPerSecond"`
	MaxActive      int               `json:"maxActive"`
	Sources        map[string]string `json:"sources"`
	// Configured is the rate before the adaptive factor (= admitPerSecond
	// without adaptive); Factor is that factor (1 = full rate).
	Configured float64 `json:"configuredAdmitPerSecond"`
	Adaptive   bool    `json:"adaptive"`
	Factor     float64 `json:"adaptiveFactor"`
}

type adminEvent struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	State string `json:"state"`
	adminSettings
	Waiting           int64   `json:"waiting"`
	Active            int64   `json:"active"`
	AdmittedPerSecond float64 `json:"admittedPerSecond"`
	Admitted          int64   `json:"admitted"`
	Abandoned         int64   `json:"abandoned"`
	Available         *int64  `json:"available"`
	Held              *int64  `json:"held"`
}

func settingsView(ev *config.Event, set line.Settings) adminSettings {
	out := adminSettings{
		Mode: set.Mode, AdmitPerSecond: displayRate(set.AdmitPerSecond), MaxActive: set.MaxActive,
		Sources: set.Sources, Configured: displayRate(set.AdmitPerSecond), Adaptive: ev.Admission.Adaptive, Factor: 1,
	}
	if out.Sources == nil {
		out.Sources = map[string]string{}
		for _, f := range policy.Fields {
			out.Sources[f] = policy.SourceConfig
		}
	}
	if set.Factor > 0 {
		out.Factor = set.Factor
		out.Configured = displayRate(set.AdmitPerSecond / set.Factor)
	}
	return out
}

// eventFigures is ev as GET /api/v1/admin/events shows it.
func (s *operatorsAPI) eventFigures(ctx context.Context, ev *config.Event) (adminEvent, error) {
	set := s.settingsFor(ev)
	counts, err := s.line.Counts(ctx, ev.ID)
	if err != nil {
		return adminEvent{}, err
	}
	st, err := s.line.Stats(ctx, ev.ID)
	if err != nil {
		return adminEvent{}, err
	}
	out := adminEvent{
		ID: ev.ID, Name: ev.Name, State: state(set, counts.Inventory, s.now()),
		adminSettings: settingsView(ev, set),
		Waiting:       counts.Waiting, Active: counts.Active,
		AdmittedPerSecond: s.history.rate(ev.ID), Admitted: st.Admitted, Abandoned: st.Abandoned,
	}
	if inv := counts.Inventory; inv.Known {
		available, held := max(inv.Available, 0), inv.Held
		out.Available, out.Held = &available, &held
	}
	return out, nil
}

// GET /api/v1/admin/events
func (s *operatorsAPI) events(c *fiber.Ctx) error {
	// A token of some events sees those.
	cfg := *s.config()
	cfg.Events = slices.DeleteFunc(slices.Clone(cfg.Events), func(ev config.Event) bool { return !grantOf(c).Covers(ev.ID) })
	out, err := everyEvent(c.UserContext(), &cfg, s.eventFigures)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"events": out})
}

// maxActiveLimit bounds an override of maxActive (the config has no bound;
// a billion fans at once is past any sale).
const maxActiveLimit = 1_000_000_000

// patchOf reads a PATCH body: each of mode, admitPerSecond and maxActive
// set (a valid value), cleared (null: back to the config's), or absent.
// Anything else is 400 naming the field.
func patchOf(body []byte) (set map[string]string, clear []string, err error) {
	// json.Unmarshal, not a Decoder and More: More is false before a '}'
	// or a ']' too, so {"mode":"paused"}} passed for one object.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, nil, invalidField("body", "must be a JSON object with any of mode, admitPerSecond, maxActive")
	}
	if len(raw) == 0 {
		return nil, nil, invalidField("body", "names nothing to change (mode, admitPerSecond, maxActive)")
	}
	set = map[string]string{}
	for _, f := range slices.Sorted(maps.Keys(raw)) {
		v := raw[f]
		if string(v) == "null" {
			if !isField(f) {
				return nil, nil, invalidField(f, "is not a setting (mode, admitPerSecond, maxActive)")
			}
			clear = append(clear, f)
			continue
		}
		switch f {
		case operators.FieldMode:
			var m string
			if json.Unmarshal(v, &m) != nil || (m != line.ModeQueue && m != line.ModeAuto && m != line.ModePassthrough && m != line.ModePaused && m != line.ModeClosed) {
				return nil, nil, invalidField(f, "must be queue, auto, passthrough, paused or closed")
			}
			set[f] = m
		case operators.FieldAdmitPerSecond:
			var r float64
			if json.Unmarshal(v, &r) != nil || !(r > 0) || r > 1e6 || math.IsInf(r, 0) {
				return nil, nil, invalidField(f, "must be a number > 0 and <= 1000000")
			}
			set[f] = policy.FormatRate(r)
		case operators.FieldMaxActive:
			var n float64
			if json.Unmarshal(v, &n) != nil || n != math.Trunc(n) || n < 1 || n > maxActiveLimit {
				return nil, nil, invalidField(f, "must be an integer >= 1 and <= %d", maxActiveLimit)
			}
			set[f] = strconv.FormatInt(int64(n), 10)
		default:
			return nil, nil, invalidField(f, "is not a setting (mode, admitPerSecond, maxActive)")
		}
	}
	return set, clear, nil
}

func isField(f string) bool { return slices.Contains(policy.Fields, f) }

// PATCH /api/v1/admin/events/{event}: the overrides go to Redis (every
// admitter puts them in force at its next tick, and keeps them across
// restarts) with the config's value they replace, so that a later edit of
// that key in the file wins. The answer is the settings then in force.
func (s *operatorsAPI) patch(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	values, clear, err := patchOf(c.Body())
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	before := s.settingsFor(ev)
	base := policy.ConfigValues(*ev)
	now := s.now().UTC()
	ovs := map[string]operators.Override{}
	for f, v := range values {
		ovs[f] = operators.Override{Value: v, Base: base[f], At: now}
	}
	if err := s.ops.SetOverrides(ctx, ev.ID, ovs, clear); err != nil {
		return err
	}
	for _, f := range sortedFields(values, clear) {
		to, ok := values[f]
		if !ok {
			to = base[f] + " (the config's)"
		}
		change := fmt.Sprintf("%s %s -> %s", f, valueOf(before, f), to)
		audit(c, s.ops, s.log, ev.ID, change)
	}
	s.log.Info("operator override", "event", ev.ID, "set", values, "cleared", clear)
	all, err := s.ops.Overrides(ctx, ev.ID)
	if err != nil {
		return err
	}
	// What the next tick puts in force: the config's settings, the
	// overrides, and the adaptive factor in force now. This gateway uses it
	// at once; the others once the admitter publishes it.
	set := policy.Overlay(*ev, policy.SettingsFor(*ev), all)
	set.Shards = before.Shards
	if ev.Admission.Adaptive {
		set.Factor = max(before.Factor, 0)
		if set.Factor > 0 {
			set.AdmitPerSecond *= set.Factor
		}
	}
	s.settingsMu.Lock()
	s.settings[ev.ID] = set
	s.settingsMu.Unlock()
	s.settingsChanged(c, ev, before, set, sortedFields(values, clear))
	return c.JSON(settingsView(ev, set))
}

func sortedFields(values map[string]string, clear []string) []string {
	var out []string
	for _, f := range policy.Fields {
		if _, ok := values[f]; ok {
			out = append(out, f)
		}
	}
	return append(out, clear...)
}

func valueOf(set line.Settings, f string) string {
	switch f {
	case operators.FieldMode:
		return set.Mode
	case operators.FieldAdmitPerSecond:
		return policy.FormatRate(set.AdmitPerSecond)
	}
	return strconv.Itoa(set.MaxActive)
}

// DELETE /api/v1/admin/events/{event}/tickets/{ticketId}: the ticket id is
// the access JWT's sub (what a fan shows, or a log line names). Its place
// goes at once, and with it its pass: the gate checks the active set on
// every request.
func (s *operatorsAPI) revoke(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	id := c.Params("ticket")
	err = s.line.Revoke(c.UserContext(), ev.ID, id)
	switch {
	case errors.Is(err, line.ErrInvalidTicket):
		return invalidField("ticketId", "is not a ticket id (the access JWT's sub, e.g. 1a.Xk…)")
	case err != nil:
		return err
	}
	change := "ticket " + id + " revoked"
	audit(c, s.ops, s.log, ev.ID, change)
	s.log.Info("ticket revoked", "event", ev.ID, "ticket", id)
	return c.SendStatus(fiber.StatusNoContent)
}

// audit writes an operator's change of event to the trail, by the
// request's token. A trail that fails is logged: the change is made all
// the same.
func audit(c *fiber.Ctx, trail Auditor, log *slog.Logger, event, change string) {
	if err := trail.Audit(c.UserContext(), operators.AuditEntry{Event: event, Change: change, Source: policy.SourceAPI, By: grantOf(c).Name}); err != nil {
		log.Warn("audit", "event", event, "change", change, "err", err)
	}
}

// limitOf is the request's ?limit= (default 100), 1 to most, or 400
// naming it.
func limitOf(c *fiber.Ctx, most int) (int, error) {
	q := c.Query("limit")
	if q == "" {
		return min(100, most), nil
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 1 || n > most {
		return 0, invalidField("limit", "must be an integer between 1 and %d", most)
	}
	return n, nil
}

// maxAudit is the most entries one GET /api/v1/admin/audit returns.
const maxAudit = 1000

// GET /api/v1/admin/audit?limit=N (default 100), newest first.
func (s *operatorsAPI) audit(c *fiber.Ctx) error {
	limit, err := limitOf(c, maxAudit)
	if err != nil {
		return err
	}
	entries, err := s.ops.AuditLog(c.UserContext(), limit)
	if err != nil {
		return err
	}
	// A token of some events reads their entries only (a reload's change
	// of no event, admitter.tick, is every event's).
	g := grantOf(c)
	out := make([]operators.AuditEntry, 0, len(entries))
	for _, e := range entries {
		if g.Covers(e.Event) {
			out = append(out, e)
		}
	}
	return c.JSON(fiber.Map{"entries": out})
}

// GET /api/v1/admin/events/{event}/history: the last 30 minutes as this
// gateway sampled them (admitted per second, waiting, active), for the
// operators' page's chart.
func (s *operatorsAPI) chart(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"event": ev.ID, "everySeconds": s.history.every.Seconds(), "points": s.history.points(ev.ID)})
}

// historyEvery is how often the gateway samples each event for the chart.
const historyEvery = 2 * time.Second

// historySpan is what the chart covers.
const historySpan = 30 * time.Minute

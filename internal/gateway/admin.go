package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/queue"
)

// The operators' API (DESIGN.md "Operators' API"): every route of it hangs
// on adminGroup, behind requireAdmin. Another operators' route is one line
// in adminRoutes.

// invalidField is 400 invalid_request naming the field at fault.
func invalidField(field, format string, args ...any) *apiError {
	return &apiError{Status: fiber.StatusBadRequest, Code: "invalid_request", Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// adminRoutes mounts the operators' API under /api/v1/admin.
func (s *Server) adminRoutes(api fiber.Router) {
	g := s.adminGroup(api)
	g.Get("/events", s.adminEvents)
	g.Patch("/events/:event", s.adminPatch)
	g.Delete("/events/:event/tickets/:ticket", s.adminRevoke)
	g.Get("/events/:event/history", s.adminHistory)
	g.Get("/events/:event/preview", s.adminPreview)
	g.Get("/audit", s.adminAudit)
	g.Post("/wallets/:account/credits", s.creditWallet)
	g.Post("/events/:event/codes", s.adminCodes)
	g.Get("/events/:event/codes", s.adminCodeCounts)
}

// adminGroup is /api/v1/admin behind requireAdmin, with the line's Redis
// budget: every operators' route goes on it.
func (s *Server) adminGroup(api fiber.Router) fiber.Router {
	return api.Group("/admin", s.requireAdmin, lineBudget, adminNoStore)
}

// requireAdmin lets a request through only with Authorization: Bearer
// <auth.admin_token>, compared in constant time (over the hashes, so that
// not even the token's length leaks). With no token configured the API is
// off and answers 404 as if it were not there.
func (s *Server) requireAdmin(c *fiber.Ctx) error {
	want := s.config().Auth.AdminToken
	if want == "" {
		return errNotFound
	}
	h := c.Get(fiber.HeaderAuthorization)
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="waitroom-admin"`)
		return errUnauthorized
	}
	got, exp := sha256.Sum256([]byte(strings.TrimSpace(h[7:]))), sha256.Sum256([]byte(want))
	if subtle.ConstantTimeCompare(got[:], exp[:]) != 1 {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="waitroom-admin", error="invalid_token"`)
		return errUnauthorized
	}
	return c.Next()
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

func settingsView(ev *config.Event, set queue.Settings) adminSettings {
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

func (s *Server) adminEvent(ctx context.Context, ev *config.Event) (adminEvent, error) {
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
func (s *Server) adminEvents(c *fiber.Ctx) error {
	out, err := everyEvent(c.UserContext(), s.config(), s.adminEvent)
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
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil || raw == nil || dec.More() {
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
			if json.Unmarshal(v, &m) != nil || (m != queue.ModeQueue && m != queue.ModePassthrough && m != queue.ModePaused && m != queue.ModeClosed) {
				return nil, nil, invalidField(f, "must be queue, passthrough, paused or closed")
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
func (s *Server) adminPatch(c *fiber.Ctx) error {
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
		if err := s.ops.Audit(ctx, operators.AuditEntry{Event: ev.ID, Change: change, Source: policy.SourceAPI}); err != nil {
			s.log.Warn("audit", "event", ev.ID, "change", change, "err", err)
		}
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

func valueOf(set queue.Settings, f string) string {
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
func (s *Server) adminRevoke(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	id := c.Params("ticket")
	err = s.line.Revoke(c.UserContext(), ev.ID, id)
	switch {
	case errors.Is(err, queue.ErrInvalidTicket):
		return invalidField("ticketId", "is not a ticket id (the access JWT's sub, e.g. 1a.Xk…)")
	case err != nil:
		return err
	}
	change := "ticket " + id + " revoked"
	if err := s.ops.Audit(c.UserContext(), operators.AuditEntry{Event: ev.ID, Change: change, Source: policy.SourceAPI}); err != nil {
		s.log.Warn("audit", "event", ev.ID, "change", change, "err", err)
	}
	s.log.Info("ticket revoked", "event", ev.ID, "ticket", id)
	return c.SendStatus(fiber.StatusNoContent)
}

// maxAudit is the most entries one GET /api/v1/admin/audit returns.
const maxAudit = 1000

// GET /api/v1/admin/audit?limit=N (default 100), newest first.
func (s *Server) adminAudit(c *fiber.Ctx) error {
	limit := 100
	if q := c.Query("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > maxAudit {
			return invalidField("limit", "must be an integer between 1 and %d", maxAudit)
		}
		limit = n
	}
	entries, err := s.ops.AuditLog(c.UserContext(), limit)
	if err != nil {
		return err
	}
	if entries == nil {
		entries = []operators.AuditEntry{}
	}
	return c.JSON(fiber.Map{"entries": entries})
}

// GET /api/v1/admin/events/{event}/history: the last 30 minutes as this
// gateway sampled them (admitted per second, waiting, active), for the
// operators' page's chart.
func (s *Server) adminHistory(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"event": ev.ID, "everySeconds": s.history.every.Seconds(), "points": s.history.points(ev.ID)})
}

// adminPage: GET /admin, the operators' page. It carries no data and no
// token: the operator types the token in, the page keeps it in the tab's
// sessionStorage and calls the API above with it (the previews too: it
// puts each into a sandboxed frame of its own, scripts off).
func (s *Server) adminPage(c *fiber.Ctx) error {
	if s.config().Auth.AdminToken == "" {
		return errNotFound
	}
	var buf bytes.Buffer
	if err := s.renderAdmin(&buf); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentSecurityPolicy, csp)
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Type("html", "utf-8")
	return c.Send(buf.Bytes())
}

// historyEvery is how often the gateway samples each event for the chart.
const historyEvery = 2 * time.Second

// historySpan is what the chart covers.
const historySpan = 30 * time.Minute

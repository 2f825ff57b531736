// Package operators keeps in Redis what the operators' API and the
// adaptive admitter decide: an event's overrides (under the event's tag, so
// every admitter and gateway sees them and they survive restarts), its
// adaptive factor, the audit trail, and the booking core's health summary
// that the adaptive admitter reads (docs/OPERATIONS.md).
package operators

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/waitroom/waitroom/internal/rdb"
)

// lua is the operators' state's function library (rdb.Library).
var lua = rdb.NewLibrary("operators", rdb.Prelude)

// Store is the operators' state, over waitroom's Redis.
type Store struct{ c *rdb.Client }

// New returns the operators' state over c.
func New(c *rdb.Client) *Store { return &Store{c: c} }

// Override is one setting an operator put in force through the API. Base
// is the config's value when it was set: once the config in force has
// another value for that key, the file was edited after the API and wins
// (the file stays the operators' first tool).
type Override struct {
	Value string    `json:"value"`
	Base  string    `json:"base"`
	At    time.Time `json:"at"`
	raw   string    // as stored, for DropOverride's compare-and-delete
}

// Override fields: the keys an operator may set (the API's JSON names).
const (
	FieldMode           = "mode"
	FieldAdmitPerSecond = "admitPerSecond"
	FieldMaxActive      = "maxActive"
)

// SetOverrides puts set in force for event and clears the fields of clear,
// in one step.
func (s *Store) SetOverrides(ctx context.Context, event string, set map[string]Override, clear []string) error {
	args := []any{len(set)}
	for f, o := range set {
		b, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("overrides: %w", err)
		}
		args = append(args, f, string(b))
	}
	for _, f := range clear {
		args = append(args, f)
	}
	err := s.c.Run(ctx, rdb.Call{Script: setOverridesScript, Keys: []string{rdb.KeysOf(event).Overrides}, Args: args}).Err()
	return rdb.Interpret("overrides", err)
}

// Overrides reads event's overrides, field → override.
func (s *Store) Overrides(ctx context.Context, event string) (map[string]Override, error) {
	m, err := s.c.HGetAll(ctx, rdb.KeysOf(event).Overrides).Result()
	if err != nil {
		return nil, rdb.Interpret("overrides", err)
	}
	out := make(map[string]Override, len(m))
	for f, raw := range m {
		var o Override
		if json.Unmarshal([]byte(raw), &o) != nil {
			continue
		}
		o.raw = raw
		out[f] = o
	}
	return out, nil
}

// DropOverride deletes o (as Overrides read it) unless another replaced it
// since: of several admitters finding the config edited, exactly one drops
// it (and tells the audit).
func (s *Store) DropOverride(ctx context.Context, event, field string, o Override) (bool, error) {
	n, err := s.c.Run(ctx, rdb.Call{Script: dropOverrideScript, Keys: []string{rdb.KeysOf(event).Overrides}, Args: []any{field, o.raw}}).Int()
	if err != nil {
		return false, rdb.Interpret("overrides", err)
	}
	return n == 1, nil
}

// setOverridesScript writes and clears overrides.
//
// KEYS: 1 overrides
// ARGV: 1 n, then n pairs (field, JSON), then the fields to clear
// Returns 1.
var setOverridesScript = lua.Script("set_overrides", `
local n = tonumber(ARGV[1])
for i = 0, n - 1 do redis.call('HSET', KEYS[1], ARGV[2 + 2 * i], ARGV[3 + 2 * i]) end
for i = 2 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
return 1
`)

// dropOverrideScript deletes an override if it is still the one read.
//
// KEYS: 1 overrides
// ARGV: 1 field, 2 its value as read
// Returns 1 if deleted, else 0.
var dropOverrideScript = lua.Script("drop_override", `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])
`)

// Adapt moves event's adaptive factor (the share of the rate in force that
// the admitter uses, 1 when healthy) one step, at most once per interval
// across every admitter replica (Redis TIME): halved (not below floor) when
// struggling > 0, raised by step (up to 1) when struggling == 0, kept when
// struggling < 0 (no signal). It returns the factor in force afterwards and
// the one before.
func (s *Store) Adapt(ctx context.Context, event string, struggling int, interval time.Duration, step, floor float64) (now, was float64, err error) {
	v, err := s.c.Run(ctx, rdb.Call{Script: adaptScript, Keys: []string{rdb.KeysOf(event).Adaptive}, Args: []any{struggling, interval.Milliseconds(), strconv.FormatFloat(step, 'g', -1, 64), strconv.FormatFloat(floor, 'g', -1, 64)}}).Slice()
	if err != nil {
		return 1, 1, rdb.Interpret("adapt", err)
	}
	r := rdb.ReplyOf(v)
	now, was = r.Float(0), r.Float(1)
	if r.Err() != nil {
		return 1, 1, fmt.Errorf("adapt: %w", r.Err())
	}
	return now, was, nil
}

// AdaptiveFactor reads event's adaptive factor (1 when none was kept).
func (s *Store) AdaptiveFactor(ctx context.Context, event string) (float64, error) {
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Adaptive, "factor").Result()
	if err != nil {
		return 1, rdb.Interpret("adapt", err)
	}
	f, err := strconv.ParseFloat(fmt.Sprint(v[0]), 64)
	if err != nil {
		return 1, nil
	}
	return f, nil
}

// adaptScript is one step of the adaptive factor.
//
// KEYS: 1 adaptive (HASH factor, at ms)
// ARGV: 1 struggling (1, 0, or -1 = unknown), 2 interval ms, 3 step, 4 floor
// Returns {factor now, factor before} as strings.
var adaptScript = lua.Script("adapt", `
local now = clock()
local v = redis.call('HMGET', KEYS[1], 'factor', 'at')
local f, at = tonumber(v[1]) or 1, tonumber(v[2]) or 0
local was = f
local s, every = tonumber(ARGV[1]), tonumber(ARGV[2])
local step, floor = tonumber(ARGV[3]), tonumber(ARGV[4])
if now - at >= every then
  if s > 0 and f > floor then
    f = math.max(floor, f / 2)
  elseif s == 0 and f < 1 then
    f = math.min(1, f + step)
  end
end
if f ~= was then redis.call('HSET', KEYS[1], 'factor', tostring(f), 'at', now) end
return {tostring(f), tostring(was)}
`)

// AuditEntry is one line of the operators' audit trail.
type AuditEntry struct {
	At     time.Time `json:"at"`
	Event  string    `json:"event"`
	Change string    `json:"change"`
	Source string    `json:"source"` // api | config | adaptive
	// By names who made the change: the operators' token's name ("admin"
	// for auth.admin_token), "config" for a reload, "adaptive" for the
	// adaptive admitter.
	By string `json:"by"`
}

// auditLen bounds the audit trail: the newest entries are kept (about).
const auditLen = 10000

// Audit appends e to the audit trail (its At is Redis TIME).
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	return s.AuditOnce(ctx, "", 0, e)
}

// AuditOnce appends e unless an entry with the same once key was appended
// within ttl: the admitter replicas that all reload the same edit tell the
// audit once.
func (s *Store) AuditOnce(ctx context.Context, once string, ttl time.Duration, e AuditEntry) error {
	k := []string{rdb.AuditKey, rdb.AuditKey}
	if once != "" {
		k[1] = rdb.AuditOnceKey(once)
	}
	err := s.c.Run(ctx, rdb.Call{Script: auditScript, Keys: k, Args: []any{auditLen, e.Event, e.Change, e.Source, ttl.Milliseconds(), byOf(e)}}).Err()
	return rdb.Interpret("audit", err)
}

// AuditLog reads the newest entries of the audit trail, newest first, at
// most limit.
func (s *Store) AuditLog(ctx context.Context, limit int) ([]AuditEntry, error) {
	msgs, err := s.c.XRevRangeN(ctx, rdb.AuditKey, "+", "-", int64(limit)).Result()
	if err != nil {
		return nil, rdb.Interpret("audit", err)
	}
	out := make([]AuditEntry, 0, len(msgs))
	for _, m := range msgs {
		e := AuditEntry{Event: fmt.Sprint(m.Values["event"]), Change: fmt.Sprint(m.Values["change"]), Source: fmt.Sprint(m.Values["source"])}
		if by, ok := m.Values["by"].(string); ok {
			e.By = by
		}
		e.By = byOf(e)
		if ms, err := strconv.ParseInt(fmt.Sprint(m.Values["at"]), 10, 64); err == nil {
			e.At = time.UnixMilli(ms).UTC()
		}
		out = append(out, e)
	}
	return out, nil
}

// byOf is who made e: its By, or for an entry that names nobody (written
// before the audit named anyone) the one who could then: the admin token
// for the API, else its source (config, adaptive).
func byOf(e AuditEntry) string {
	switch {
	case e.By != "":
		return e.By
	case e.Source == "api":
		return "admin"
	}
	return e.Source
}

// auditScript appends to the audit stream, once per once key.
//
// KEYS: 1 the audit stream, 2 the once key (= KEYS[1]: no once key)
// ARGV: 1 max length, 2 event, 3 change, 4 source, 5 the once key's ttl
// ms, 6 by
// Returns 1 if appended, 0 if the once key was there.
var auditScript = lua.Script("audit", `
if KEYS[2] ~= KEYS[1] then
  if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[5]) then return 0 end
end
local now = clock()
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'at', now, 'event', ARGV[2], 'change', ARGV[3], 'source', ARGV[4], 'by', ARGV[6])
return 1
`)

// BookingHealth is what one booking core replica publishes of its own
// signals over its last 10 s, for the adaptive admitter.
type BookingHealth struct {
	Replica  string        `json:"replica"`
	HoldP99  time.Duration `json:"holdP99"`
	Holds    int64         `json:"holds"`
	Requests int64         `json:"requests"`
	Errors   int64         `json:"errors"` // 5xx answers
	At       time.Time     `json:"at"`     // the replica's clock
	AtMs     int64         `json:"atMs"`   // At in unix ms, for the script that drops stale ones
}

// healthStale: a replica's summary older than this is dropped by the next
// publisher (a replica that stopped), and ignored by readers long before.
const healthStale = time.Minute

// PublishBookingHealth stores h as its replica's summary (booking core only).
func (s *Store) PublishBookingHealth(ctx context.Context, h BookingHealth) error {
	h.AtMs = h.At.UnixMilli()
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("booking health: %w", err)
	}
	err = s.c.Run(ctx, rdb.Call{Script: healthScript, Keys: []string{rdb.BookingHealthKey}, Args: []any{h.Replica, string(b), h.At.Add(-healthStale).UnixMilli()}}).Err()
	return rdb.Interpret("booking health", err)
}

// RemoveBookingHealth drops a replica's summary (it stops).
func (s *Store) RemoveBookingHealth(ctx context.Context, replica string) error {
	return rdb.Interpret("booking health", s.c.HDel(ctx, rdb.BookingHealthKey, replica).Err())
}

// BookingHealthOf reads the summaries of every booking core replica that
// published since `since`.
func (s *Store) BookingHealthOf(ctx context.Context, since time.Time) ([]BookingHealth, error) {
	m, err := s.c.HGetAll(ctx, rdb.BookingHealthKey).Result()
	if err != nil {
		return nil, rdb.Interpret("booking health", err)
	}
	var out []BookingHealth
	for _, raw := range m {
		var h BookingHealth
		if json.Unmarshal([]byte(raw), &h) == nil && !h.At.Before(since) {
			out = append(out, h)
		}
	}
	return out, nil
}

// healthScript stores a replica's summary and drops those stale.
//
// KEYS: 1 booking health (HASH replica → JSON with "at")
// ARGV: 1 replica, 2 JSON, 3 stale before (ms, the publisher's clock)
// Returns 1.
var healthScript = lua.Script("health", `
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local ok, h = pcall(cjson.decode, all[i + 1])
  if not ok or type(h) ~= 'table' or type(h.atMs) ~= 'number' or h.atMs < tonumber(ARGV[3]) then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return 1
`)

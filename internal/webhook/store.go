package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
)

// Store is every event's webhook outbox, in Redis.
type Store struct {
	c *rdb.Client
	// Keep is how many deliveries an event's log keeps (default 1000): the
	// oldest settled ones go as new ones come.
	Keep int
}

// NewStore is the outbox over c.
func NewStore(c *rdb.Client) *Store { return &Store{c: c, Keep: 1000} }

// call runs one of the outbox's scripts for event: its keys and the
// receivers first (outboxLua), then own.
func (s *Store) call(ctx context.Context, script *rdb.Script, event string, eps []Endpoint, extra []string, own ...any) *redis.Cmd {
	k := rdb.KeysOf(event)
	keys := append([]string{k.Hooks, k.HookMoments, k.HookDeliveries, k.HookPending, k.HookLog}, extra...)
	args := make([]any, 0, 3+2*len(eps)+len(own))
	args = append(args, event, s.Keep, len(eps))
	for _, e := range eps {
		args = append(args, e.ID(), e.types())
	}
	return s.c.Run(ctx, rdb.Call{Script: script, Keys: keys, Args: append(args, own...)})
}

// Enqueue queues m for every receiver of eps that wants it, once: the
// same moment (its ID) again queues nothing. It returns how many
// deliveries it made.
func (s *Store) Enqueue(ctx context.Context, eps []Endpoint, m Moment) (int, error) {
	data, err := json.Marshal(m.Data)
	if err != nil {
		return 0, fmt.Errorf("webhook: %s: %w", m.Type, err)
	}
	n, err := s.call(ctx, enqueueScript, m.Event, eps, nil, m.Type, data, m.ID()).Int()
	if err != nil {
		return 0, rdb.Interpret("webhook enqueue", err)
	}
	queued(m.Type, n)
	return n, nil
}

// View is an admitter's view of an event at a tick: what Observe cannot
// read in Redis itself.
type View struct {
	Event string
	// Values are the config's values of the event (Reconfigure's): the
	// fence a view must match to announce anything.
	Values map[string]any
	// Mode is the config's mode (the override is read in Redis).
	Mode string
	// OpensAt and ClosesAt are the times in force (the lottery's when it
	// froze them); nil = none.
	OpensAt, ClosesAt *time.Time
	// Adaptive: the event has admission.adaptive (booking.* moments).
	Adaptive bool
	// Lottery and Selection are lottery.drawn's and selection.drawn's data
	// once the draw is published; nil before.
	Lottery, Selection any
}

// Observe compares the event's state (observeScript) with the state last
// announced and makes the moments of what moved, once whoever else looks
// at the same time. It returns the types made (each once per moment, even
// when no receiver wanted it).
func (s *Store) Observe(ctx context.Context, eps []Endpoint, v View) ([]string, error) {
	fence, err := fenceOf(v.Values)
	if err != nil {
		return nil, err
	}
	draws := [2]string{}
	for i, d := range []any{v.Lottery, v.Selection} {
		if d != nil {
			b, err := json.Marshal(d)
			if err != nil {
				return nil, fmt.Errorf("webhook: draw: %w", err)
			}
			draws[i] = string(b)
		}
	}
	adaptive := "0"
	if v.Adaptive {
		adaptive = "1"
	}
	k := rdb.KeysOf(v.Event)
	r, err := s.call(ctx, observeScript, v.Event, eps, []string{k.Inventory, k.Overrides, k.Adaptive, k.Stats, k.Wait},
		fence, v.Mode, msOf(v.OpensAt), msOf(v.ClosesAt), adaptive, draws[0], draws[1]).Slice()
	if err != nil {
		return nil, rdb.Interpret("webhook observe", err)
	}
	var made []string
	for i := 0; i+1 < len(r); i += 2 {
		t, _ := r[i].(string)
		made = append(made, t)
		queued(t, int(rdb.Num(r[i+1])))
	}
	return made, nil
}

// Reconfigure announces that the event's config values are now values
// (settings.changed, by "config", with what changed since those last
// announced), once however many admitters reload the same edit: the one
// that moves them makes the moment. Nothing is announced for an event
// whose values were never announced (it is new to the outbox).
func (s *Store) Reconfigure(ctx context.Context, eps []Endpoint, event string, values map[string]any) error {
	mine, err := fenceOf(values)
	if err != nil {
		return err
	}
	for try := 0; try < 3; try++ {
		cur, err := s.c.HGet(ctx, rdb.KeysOf(event).Hooks, "config").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return rdb.Interpret("webhook reconfigure", err)
		}
		if cur == mine {
			return nil
		}
		data := ""
		if cur != "" {
			var was map[string]any
			if json.Unmarshal([]byte(cur), &was) == nil {
				if ch := changes(was, values); len(ch) > 0 {
					b, err := json.Marshal(SettingsData{Changes: ch, By: "config"})
					if err != nil {
						return err
					}
					data = string(b)
				}
			}
		}
		n, err := s.call(ctx, reconfigureScript, event, eps, nil, cur, mine, data).Int()
		if err != nil {
			return rdb.Interpret("webhook reconfigure", err)
		}
		if n >= 0 {
			if data != "" {
				queued(SettingsChanged, n)
			}
			return nil
		}
		// Another admitter moved them meanwhile: look again.
	}
	return nil
}

// changes lists what differs between two sets of values, by name (a
// value gone or new is null on its side).
func changes(was, now map[string]any) map[string]Change {
	out := map[string]Change{}
	for _, k := range slices.Sorted(maps.Keys(now)) {
		a, b := jsonOf(was[k]), jsonOf(now[k])
		if a != b {
			out[k] = Change{From: was[k], To: now[k]}
		}
	}
	for k, v := range was {
		if _, ok := now[k]; !ok {
			out[k] = Change{From: v, To: nil}
		}
	}
	return out
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// fenceOf is values as one text, the same for the same values (map keys
// sorted by encoding/json); numbers go through JSON once first, so that
// values read back from the outbox compare equal to fresh ones.
func fenceOf(values map[string]any) (string, error) {
	b, err := json.Marshal(values)
	if err != nil {
		return "", fmt.Errorf("webhook: values: %w", err)
	}
	return string(b), nil
}

func msOf(t *time.Time) string {
	if t == nil {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// Forget takes the 410 Gone marks off receivers (their identities) the
// config stopped naming: named again later, they receive again.
func (s *Store) Forget(ctx context.Context, identities []string) error {
	if len(identities) == 0 {
		return nil
	}
	return rdb.Interpret("webhook forget", s.c.HDel(ctx, rdb.HooksGoneKey, identities...).Err())
}

// gone reads the receivers that answered 410 Gone.
func (s *Store) gone(ctx context.Context) (map[string]bool, error) {
	m, err := s.c.HGetAll(ctx, rdb.HooksGoneKey).Result()
	if err != nil {
		return nil, rdb.Interpret("webhook gone", err)
	}
	out := make(map[string]bool, len(m))
	for id := range m {
		out[id] = true
	}
	return out, nil
}

// markGone records that the receiver e answered 410 Gone, at now.
func (s *Store) markGone(ctx context.Context, e Endpoint, now time.Time) error {
	return rdb.Interpret("webhook gone", s.c.HSet(ctx, rdb.HooksGoneKey, e.Identity(), now.UnixMilli()).Err())
}

// taken is a delivery a sender claimed (or found failed or gone).
type taken struct {
	what     string // claimed | failed | gone
	member   string // "<moment id> <endpoint id>"
	id, ep   string
	moment   stored
	attempts int
}

// claim takes the heads of event's lines that are due (claimScript).
func (s *Store) claim(ctx context.Context, event, owner string, inflight, window time.Duration, gone []string) ([]taken, error) {
	k := rdb.KeysOf(event)
	r, err := s.c.Run(ctx, rdb.Call{Script: claimScript, Keys: []string{k.HookDeliveries, k.HookPending, k.HookMoments},
		Args: []any{owner, inflight.Milliseconds(), window.Milliseconds(), claimLook, " " + strings.Join(gone, " ") + " "}}).Slice()
	if err != nil {
		return nil, rdb.Interpret("webhook claim", err)
	}
	out := make([]taken, 0, len(r)/4)
	for i := 0; i+3 < len(r); i += 4 {
		t := taken{attempts: int(rdb.Num(r[i+3]))}
		t.what, _ = r[i].(string)
		t.member, _ = r[i+1].(string)
		t.id, t.ep, _ = strings.Cut(t.member, " ")
		raw, _ := r[i+2].(string)
		if err := json.Unmarshal([]byte(raw), &t.moment); err != nil {
			return nil, fmt.Errorf("webhook claim %s: %w", t.member, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// claimLook is how many pending deliveries of an event one claim looks
// at: enough for every receiver's head behind an hour of moments.
const claimLook = 1000

// settle records how an attempt at t went (settleScript).
func (s *Store) settle(ctx context.Context, event, owner string, t taken, how string, attempts int, retry time.Duration, why string) error {
	k := rdb.KeysOf(event)
	err := s.c.Run(ctx, rdb.Call{Script: settleScript, Keys: []string{k.HookDeliveries, k.HookPending},
		Args: []any{t.member, owner, how, attempts, retry.Milliseconds(), why}}).Err()
	return rdb.Interpret("webhook settle", err)
}

// Deliveries reads the latest deliveries of events, latest first, at
// most limit; url names each receiver (by its id) as the config does
// (a receiver the config no longer names shows its id).
func (s *Store) Deliveries(ctx context.Context, events []string, urls map[string]string, limit int) ([]Delivery, error) {
	var out []Delivery
	for _, event := range events {
		k := rdb.KeysOf(event)
		members, err := s.c.ZRevRangeWithScores(ctx, k.HookLog, 0, int64(limit-1)).Result()
		if err != nil {
			return nil, rdb.Interpret("webhook deliveries", err)
		}
		if len(members) == 0 {
			continue
		}
		fields, ids := make([]string, len(members)), make([]string, len(members))
		for i, m := range members {
			fields[i] = m.Member.(string)
			ids[i], _, _ = strings.Cut(fields[i], " ")
		}
		states, err := s.c.HMGet(ctx, k.HookDeliveries, fields...).Result()
		if err != nil {
			return nil, rdb.Interpret("webhook deliveries", err)
		}
		moments, err := s.c.HMGet(ctx, k.HookMoments, ids...).Result()
		if err != nil {
			return nil, rdb.Interpret("webhook deliveries", err)
		}
		for i, m := range members {
			st, _ := states[i].(string)
			raw, _ := moments[i].(string)
			var mo stored
			_ = json.Unmarshal([]byte(raw), &mo)
			f := strings.SplitN(st, " ", 7)
			if len(f) < 6 {
				continue
			}
			_, ep, _ := strings.Cut(fields[i], " ")
			url, ok := urls[ep]
			if !ok {
				url = "(no longer configured: " + ep + ")"
			}
			d := Delivery{ID: ids[i], Type: mo.Type, Event: event, URL: url, Status: f[0], At: time.UnixMilli(mo.AtMs).UTC(), seq: int64(m.Score)}
			d.Attempts, _ = strconv.Atoi(f[1])
			if len(f) == 7 {
				d.Error = f[6]
			}
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b Delivery) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return cmp.Compare(b.seq, a.seq)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

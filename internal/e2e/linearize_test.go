package e2e_test

// The seat operations of a drill, recorded as the fans saw them (invoke and
// return times, what they asked, what they were answered), and checked for
// linearizability (github.com/anishathalye/porcupine) against a model of
// the seats: a hold succeeds only on seats that are free (or whose hold
// lapsed), all or nothing; a release frees only its own hold's seats, never
// a booked one; a checkout finds its hold still holding its seats; a
// confirmation books its hold's seats, and a booked seat never changes
// hands. An answer the fan could not read (503, 504, no answer) may or may
// not have taken effect: the model allows both.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// seatOp is one operation on the seats.
type seatOp struct {
	Kind  string   // hold, release, checkout, confirm
	Seats []string // the hold's seats (asked, for a hold)
	Hold  string   // the hold's id ("" for a hold whose answer was lost)
	// Result: ok (201, 204, CONFIRMED), refused (409, 401, 429: nothing
	// changed), unknown (no answer the fan could read).
	Result string
	// Expires is a hold's expiry as answered (zero: not known); a seat
	// whose hold lapsed may be held again (the drills' holds outlive them).
	Expires time.Time
}

func (o seatOp) String() string {
	s := fmt.Sprintf("%s %s", o.Kind, strings.Join(o.Seats, ","))
	if o.Hold != "" {
		s += " hold " + o.Hold[:min(8, len(o.Hold))]
	}
	return s + " → " + o.Result
}

// history records the seat operations of a drill.
type history struct {
	began time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func newHistory() *history { return &history{began: time.Now()} }

// since is a monotonic timestamp of the history.
func (h *history) since(t time.Time) int64 { return int64(t.Sub(h.began)) }

// add records op, invoked at call and answered at ret (ret zero: never
// answered, which the checker reads as "may have happened any time after
// call").
func (h *history) add(client int, op seatOp, call, ret time.Time) {
	if h == nil {
		return
	}
	r := int64(math.MaxInt64)
	if !ret.IsZero() {
		r = h.since(ret)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: op, Call: h.since(call), Output: op.Result, Return: r})
}

// record adds op invoked at call and answered now with HTTP status code:
// 2xx is ok, 409, 401 and 429 refused (nothing changed), anything else
// unknown (the answer says nothing of whether it happened).
func (h *history) record(client int, op seatOp, code int, call time.Time) {
	h.recordAt(client, op, code, call, time.Now())
}

// recordAt is record answered at ret (zero: never).
func (h *history) recordAt(client int, op seatOp, code int, call, ret time.Time) {
	if h == nil || len(op.Seats) == 0 {
		return
	}
	switch {
	case code >= 200 && code < 300:
		op.Result = "ok"
	case code == 409 || code == 401 || code == 429:
		op.Result = "refused"
	default:
		op.Result, ret = "unknown", time.Time{}
	}
	h.add(client, op, call, ret)
}

func (h *history) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// seats is the model's state: seat → "" (free), "H:<hold>" (held),
// "B:<hold>" (booked by that hold's booking).
type seats map[string]string

// seatModel is the sequential specification of the seats.
var seatModel = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{seats{}} },
	Step: func(state, input, _ interface{}) []interface{} {
		s, op := state.(seats), input.(seatOp)
		next, legal := stepSeats(s, op)
		switch op.Result {
		case "refused":
			return []interface{}{s}
		case "unknown":
			// It happened, or it did not.
			if legal {
				return []interface{}{s, next}
			}
			return []interface{}{s}
		}
		if !legal {
			return nil
		}
		return []interface{}{next}
	},
	Equal:             func(a, b interface{}) bool { return maps.Equal(a.(seats), b.(seats)) },
	DescribeOperation: func(input, _ interface{}) string { return input.(seatOp).String() },
	DescribeState: func(state interface{}) string {
		s := state.(seats)
		keys := slices.Sorted(maps.Keys(s))
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			if s[k] != "" {
				parts = append(parts, k+"="+s[k][:min(10, len(s[k]))])
			}
		}
		return "{" + strings.Join(parts, " ") + "}"
	},
}

// stepSeats applies op as if it succeeded: the state after it, and whether
// it could succeed at all from s.
func stepSeats(s seats, op seatOp) (seats, bool) {
	held, booked := "H:"+op.Hold, "B:"+op.Hold
	next := maps.Clone(s)
	switch op.Kind {
	case "hold":
		owner := held
		if op.Hold == "" {
			// A hold whose answer was lost: seats held by a hold nobody
			// knows (it can be neither released nor paid).
			owner = "H:?" + strings.Join(op.Seats, ",")
		}
		for _, c := range op.Seats {
			if s[c] != "" {
				return s, false
			}
			next[c] = owner
		}
	case "release":
		for _, c := range op.Seats {
			if s[c] != held {
				return s, false
			}
			next[c] = ""
		}
	case "checkout":
		for _, c := range op.Seats {
			if s[c] != held {
				return s, false
			}
		}
	case "confirm":
		for _, c := range op.Seats {
			if s[c] != held && s[c] != booked {
				return s, false
			}
			next[c] = booked
		}
	default:
		return s, false
	}
	return next, true
}

// partition splits a history into groups of operations that share no seat
// (connected by the seats they touch): each is checked alone.
func partition(ops []porcupine.Operation) [][]porcupine.Operation {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if p, ok := parent[x]; ok && p != x {
			parent[x] = find(p)
			return parent[x]
		}
		parent[x] = x
		return x
	}
	for _, o := range ops {
		cs := o.Input.(seatOp).Seats
		for _, c := range cs[1:] {
			parent[find(c)] = find(cs[0])
		}
		find(cs[0])
	}
	groups := map[string][]porcupine.Operation{}
	for _, o := range ops {
		r := find(o.Input.(seatOp).Seats[0])
		groups[r] = append(groups[r], o)
	}
	out := make([][]porcupine.Operation, 0, len(groups))
	for _, g := range groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0].Call < out[j][0].Call })
	return out
}

// linearizable checks ops against the seat model. It returns how many
// operations were checked and, when the history is not linearizable, the
// smallest counter-example found, one operation a line: the operations of
// as few holds as make it illegal (a hold's lifecycle, its hold, release,
// checkouts and confirmation, is kept or taken away whole: taking away a
// hold but not its confirmation would make a counter-example of nothing).
func linearizable(ops []porcupine.Operation, timeout time.Duration) (checked int, counterExample string, err error) {
	model := seatModel.ToModel()
	var failing []porcupine.Operation
	for _, g := range partition(ops) {
		switch porcupine.CheckOperationsTimeout(model, g, timeout) {
		case porcupine.Ok:
		case porcupine.Illegal:
			if failing == nil || len(g) < len(failing) {
				failing = g
			}
		default:
			return len(ops), "", fmt.Errorf("the check of %d operations timed out after %s", len(g), timeout)
		}
	}
	if failing == nil {
		return len(ops), "", nil
	}
	// Shrink, a hold's lifecycle at a time.
	var (
		units [][]porcupine.Operation
		index = map[string]int{}
	)
	for i, o := range failing {
		key := o.Input.(seatOp).Hold
		if key == "" {
			key = fmt.Sprint("lost answer ", i)
		}
		if _, ok := index[key]; !ok {
			index[key] = len(units)
			units = append(units, nil)
		}
		units[index[key]] = append(units[index[key]], o)
	}
	for i := 0; i < len(units); {
		rest := slices.Delete(slices.Clone(units), i, i+1)
		if len(rest) > 0 && porcupine.CheckOperationsTimeout(model, slices.Concat(rest...), timeout) == porcupine.Illegal {
			units = rest
			continue
		}
		i++
	}
	failing = slices.Concat(units...)
	sort.Slice(failing, func(i, j int) bool { return failing[i].Call < failing[j].Call })
	var b strings.Builder
	for _, o := range failing {
		ret := "never answered"
		if o.Return != math.MaxInt64 {
			ret = fmt.Sprintf("%.3fs", time.Duration(o.Return).Seconds())
		}
		fmt.Fprintf(&b, "  fan %d: [%.3fs, %s] %s\n", o.ClientId, time.Duration(o.Call).Seconds(), ret, o.Input.(seatOp))
	}
	return len(ops), b.String(), nil
}

// The seat model itself, on histories written by hand: what it accepts,
// what it refuses, and the counter-example it prints.
func TestSeatModel(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		client    int
		op        seatOp
		code      int
		call, ret float64 // seconds; ret < 0: never answered
	}
	hold := func(id string, seats ...string) seatOp { return seatOp{Kind: "hold", Seats: seats, Hold: id} }
	of := func(kind, id string, seats ...string) seatOp { return seatOp{Kind: kind, Seats: seats, Hold: id} }
	cases := []struct {
		name    string
		steps   []step
		illegal []string // the counter-example's operations, if any
	}{
		{"a sale", []step{
			{1, hold("h1", "A1", "A2"), 201, 0, 1},
			{2, hold("h2", "A2"), 409, 0.5, 1.5},
			{1, of("checkout", "h1", "A1", "A2"), 201, 2, 3},
			{1, of("confirm", "h1", "A1", "A2"), 200, 3, 5},
			{2, hold("h3", "A1"), 409, 6, 7},
		}, nil},
		{"released, then taken by another", []step{
			{1, hold("h1", "A1"), 201, 0, 1},
			{1, of("release", "h1", "A1"), 204, 2, 3},
			{2, hold("h2", "A1"), 201, 4, 5},
		}, nil},
		{"two holds of one seat, both answered 201", []step{
			{1, hold("h1", "A1"), 201, 0, 2},
			{2, hold("h2", "A1"), 201, 1, 3},
			{3, hold("h3", "B1"), 201, 1, 3},
		}, []string{"hold A1 hold h1 → ok", "hold A1 hold h2 → ok"}},
		{"a booked seat taken again", []step{
			{1, hold("h1", "A1"), 201, 0, 1},
			{1, of("confirm", "h1", "A1"), 200, 2, 3},
			{2, hold("h2", "A1"), 201, 4, 5},
		}, []string{"hold A1 hold h1 → ok", "confirm A1 hold h1 → ok", "hold A1 hold h2 → ok"}},
		{"a hold whose answer was lost may not have happened", []step{
			{1, hold("", "A1"), 503, 0, -1},
			{2, hold("h2", "A1"), 201, 4, 5},
		}, nil},
		{"a hold whose answer was lost, and then the seat is refused to everyone", []step{
			{1, hold("", "A1"), 504, 0, -1},
			{2, hold("h2", "A1"), 409, 4, 5},
		}, nil},
		{"a release of a seat held by another", []step{
			{1, hold("h1", "A1"), 201, 0, 1},
			{2, of("release", "h2", "A1"), 204, 2, 3},
		}, []string{"release A1 hold h2 → ok"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &history{began: at(0)}
			for _, s := range tc.steps {
				ret := time.Time{}
				if s.ret >= 0 {
					ret = at(s.ret)
				}
				h.recordAt(s.client, s.op, s.code, at(s.call), ret)
			}
			n, counter, err := linearizable(h.operations(), 10*time.Second)
			if err != nil || n != len(tc.steps) {
				t.Fatalf("checked %d of %d: %v", n, len(tc.steps), err)
			}
			if tc.illegal == nil {
				if counter != "" {
					t.Fatalf("refused a legal history:\n%s", counter)
				}
				return
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(counter), "\n") {
				got = append(got, line[strings.Index(line, "] ")+2:])
			}
			if !slices.Equal(got, tc.illegal) {
				t.Fatalf("counter-example:\n%s\nwant the operations %q", counter, tc.illegal)
			}
		})
	}
}

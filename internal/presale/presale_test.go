package presale_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/notify"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/presale/presaletest"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/atrest"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

var secret = []byte("presale-test-secret-0123456789abcdef")

// drawSecret is the tests' auth.draw_secret: the selection's seed is
// derived from it.
var drawSecret = []byte("presale-draw-secret-0123456789abcd")

// sale is one event's presale over a private Redis: the line and the
// presale, as the gateway and the admitter hold them.
type sale struct {
	t     *testing.T
	ctx   context.Context
	rdb   redis.UniversalClient
	line  *queue.Store
	pre   *presale.Store
	event string
	plan  presale.Plan
	set   line.Settings
}

func newSale(t *testing.T, plan presale.Plan) *sale {
	t.Helper()
	_, c := testenv.Redis(t)
	return newSaleOn(t, c, plan)
}

// newSaleOn is newSale on the Redis (a server, or a Cluster) of c.
func newSaleOn(t *testing.T, c redis.UniversalClient, plan presale.Plan) *sale {
	t.Helper()
	store := queue.NewStore(c, secret)
	s := &sale{t: t, ctx: context.Background(), rdb: c, line: store, event: "tour",
		plan: plan, pre: presale.New(rdb.New(c), store, secret, "test-admitter").WithDrawSecret(drawSecret)}
	opens := plan.OpensAt
	s.set = line.Settings{Mode: line.ModeQueue, AdmitPerSecond: 100, MaxActive: 1000, AccessTTL: time.Minute,
		AbandonAfter: time.Minute, OpensAt: &opens, Presale: true, GeneralSaleAt: plan.GeneralSaleAt}
	return s
}

// another is a second admitter (or gateway) on the same Redis.
func (s *sale) another(owner string) *presale.Store {
	return presale.New(rdb.New(s.rdb), s.line, secret, owner).WithDrawSecret(drawSecret)
}

func (s *sale) register(account string) string {
	s.t.Helper()
	id, _, err := s.pre.Register(s.ctx, s.event, s.plan, account)
	if err != nil {
		s.t.Fatalf("register %s: %v", account, err)
	}
	return id
}

// closeAndDraw waits for registration to close and steps the admitter
// until the selection is drawn.
func (s *sale) closeAndDraw() {
	s.t.Helper()
	time.Sleep(time.Until(s.plan.RegistrationClosesAt) + 5*time.Millisecond)
	if err := s.pre.Step(s.ctx, s.event, s.plan); err != nil {
		s.t.Fatalf("step: %v", err)
	}
	sel, err := s.pre.Selection(s.ctx, s.event, s.plan)
	if err != nil || !sel.Drawn {
		s.t.Fatalf("selection after the close: %+v, %v", sel, err)
	}
}

func (s *sale) join(account string) (line.JoinResult, error) {
	return s.line.JoinWith(s.ctx, s.event, s.set, line.JoinOptions{Account: account})
}

// plan: registration open now for reg, the first window opening after
// that at opensIn, windows of window.
func plan(reg, opensIn, window time.Duration, selected, group int) presale.Plan {
	now := time.Now()
	return presale.Plan{RegistrationOpensAt: now.Add(-time.Minute), RegistrationClosesAt: now.Add(reg),
		Selected: selected, GroupSize: group, Window: window, OpensAt: now.Add(reg + opensIn)}
}

// 64 devices of one account register at once (and 64 other accounts with
// them): one registration each, the same id on every device.
func TestOneRegistrationPerAccount(t *testing.T) {
	s := newSale(t, plan(time.Minute, time.Minute, time.Hour, 10, 10))
	var created atomic.Int64
	ids := make([]string, 128)
	testenv.Race(128, func(i int) {
		account := "same"
		if i%2 == 1 {
			account = fmt.Sprintf("other-%d", i)
		}
		id, made, err := s.pre.Register(s.ctx, s.event, s.plan, account)
		if err != nil {
			t.Errorf("register %d: %v", i, err)
		}
		if made {
			created.Add(1)
		}
		ids[i] = id
	})
	if got := created.Load(); got != 65 {
		t.Errorf("%d registrations created, want 65 (one per account)", got)
	}
	for i := 0; i < 128; i += 2 {
		if ids[i] != ids[0] {
			t.Fatalf("device %d got %q, device 0 %q: one account, one registration", i, ids[i], ids[0])
		}
	}
	if n := s.rdb.HLen(s.ctx, rdb.KeysOf(s.event).PresaleAccounts).Val(); n != 65 {
		t.Errorf("Redis holds %d registrations, want 65", n)
	}
	reg, err := s.pre.Status(s.ctx, s.event, s.plan, "same")
	if err != nil || reg.ID != ids[0] || reg.Status != presale.Registered || reg.Rank != 0 {
		t.Errorf("status = %+v, %v", reg, err)
	}
}

// Registration is open from registration_opens_at to its close, by Redis
// TIME; a withdrawn registration is gone, and a new one gets a new id.
func TestRegistrationWindowAndWithdrawal(t *testing.T) {
	p := plan(1500*time.Millisecond, time.Minute, time.Hour, 10, 10)
	early := p
	early.RegistrationOpensAt = time.Now().Add(time.Hour)
	early.RegistrationClosesAt = time.Now().Add(2 * time.Hour)
	s := newSale(t, p)
	if _, _, err := s.pre.Register(s.ctx, s.event, early, "a"); !errors.Is(err, presale.ErrRegistrationClosed) {
		t.Fatalf("register before the opening: %v, want ErrRegistrationClosed", err)
	}
	if _, _, err := s.pre.Register(s.ctx, s.event, s.plan, ""); !errors.Is(err, presale.ErrAccountRequired) {
		t.Fatalf("register without an account: %v", err)
	}
	first := s.register("a")
	if err := s.pre.Withdraw(s.ctx, s.event, s.plan, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pre.Status(s.ctx, s.event, s.plan, "a"); !errors.Is(err, presale.ErrNotRegistered) {
		t.Fatalf("status after withdrawing: %v, want ErrNotRegistered", err)
	}
	if err := s.pre.Withdraw(s.ctx, s.event, s.plan, "a"); !errors.Is(err, presale.ErrNotRegistered) {
		t.Fatalf("withdraw twice: %v, want ErrNotRegistered", err)
	}
	second := s.register("a")
	if second == first {
		t.Fatalf("a registration after withdrawing got the old id %q", first)
	}
	s.register("b")
	time.Sleep(time.Until(s.plan.RegistrationClosesAt) + 5*time.Millisecond)
	if _, _, err := s.pre.Register(s.ctx, s.event, s.plan, "c"); !errors.Is(err, presale.ErrRegistrationClosed) {
		t.Fatalf("register after the close: %v", err)
	}
	if err := s.pre.Withdraw(s.ctx, s.event, s.plan, "b"); !errors.Is(err, presale.ErrRegistrationClosed) {
		t.Fatalf("withdraw after the close: %v", err)
	}
	// A reload that moves the close later does not reopen a frozen one.
	if err := s.pre.Step(s.ctx, s.event, s.plan); err != nil {
		t.Fatal(err)
	}
	later := s.plan
	later.RegistrationClosesAt = time.Now().Add(time.Hour)
	if _, _, err := s.pre.Register(s.ctx, s.event, later, "c"); !errors.Is(err, presale.ErrRegistrationClosed) {
		t.Fatalf("register after the freeze, the close moved later: %v", err)
	}
	if n := s.rdb.HLen(s.ctx, rdb.KeysOf(s.event).PresaleAccounts).Val(); n != 2 {
		t.Errorf("%d registrations, want 2", n)
	}
}

// The selection anyone can recompute: from the published seed and list
// alone (the recipe of docs/QUEUE.md, written here without package draw),
// the digest, the key, every draw and the order; and the list names
// registrations, never accounts.
func TestSelectionAnyoneCanRecompute(t *testing.T) {
	s := newSale(t, plan(1500*time.Millisecond, time.Minute, time.Hour, 40, 10))
	accounts := map[string]bool{}
	for i := range 300 {
		a := fmt.Sprintf("acct-%03d", i)
		accounts[a] = true
		s.register(a)
	}
	// Five withdraw (they stay entries), and one of them registers again
	// (a new id, a new entry).
	for i := 10; i < 15; i++ {
		if err := s.pre.Withdraw(s.ctx, s.event, s.plan, fmt.Sprintf("acct-%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s.register("acct-010")
	before, err := s.pre.Selection(s.ctx, s.event, s.plan)
	if err != nil || before.Commitment == "" || before.Drawn || before.Seed != "" {
		t.Fatalf("before the close: %+v, %v (a commitment, no seed)", before, err)
	}
	var w bytes.Buffer
	if err := s.pre.Entries(s.ctx, s.event, &w); !errors.Is(err, presale.ErrNotDrawn) || w.Len() > 0 {
		t.Fatalf("entries before the draw: %v, %d bytes", err, w.Len())
	}
	s.closeAndDraw()
	sel, _ := s.pre.Selection(s.ctx, s.event, s.plan)
	if err := s.pre.Entries(s.ctx, s.event, &w); err != nil {
		t.Fatal(err)
	}
	list := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
	if len(list) != 301 || sel.Entries != 301 {
		t.Fatalf("%d entries listed, %d said, want 301 (300, and one made again after withdrawing: the withdrawn stay entries)", len(list), sel.Entries)
	}
	if err := presaletest.CheckDraw(sel.Seed, sel.Commitment, sel.EntriesDigest, w.Bytes()); err != nil {
		t.Fatal(err)
	}
	for _, id := range list {
		if accounts[id] || strings.Contains(id, "acct-") {
			t.Fatalf("the public list names an account: %q", id)
		}
	}
	// Each account's rank is its registration's place in the list.
	for _, a := range []string{"acct-000", "acct-150", "acct-299"} {
		reg, err := s.pre.Status(s.ctx, s.event, s.plan, a)
		if err != nil || list[reg.Rank-1] != reg.ID {
			t.Fatalf("%s: %+v, %v; the list has %q at its rank", a, reg, err, list[max(reg.Rank-1, 0)])
		}
		want := presale.Waitlisted
		if reg.Rank <= 40 {
			want = presale.Selected
		}
		if reg.Status != want {
			t.Errorf("%s at rank %d: %s, want %s", a, reg.Rank, reg.Status, want)
		}
	}
}

// An admitter that died halfway through the selection (its lease still
// held, part of the list written, nothing published) is taken over once
// its lease lapses, and the next one draws the same ranks.
func TestSelectionTakenOverDrawsTheSame(t *testing.T) {
	s := newSale(t, plan(1500*time.Millisecond, time.Minute, time.Hour, 20, 10))
	for i := range 120 {
		s.register(fmt.Sprintf("fan-%d", i))
	}
	s.closeAndDraw()
	var first bytes.Buffer
	if err := s.pre.Entries(s.ctx, s.event, &first); err != nil {
		t.Fatal(err)
	}
	k := rdb.KeysOf(s.event)
	ranks := s.rdb.Get(s.ctx, k.PresaleRanks).Val()
	// Back to what a dead admitter leaves: frozen, the lease its own,
	// half of what it writes, nothing published.
	s.rdb.HDel(s.ctx, k.Presale, "drawn", "digest", "selected", "invited", "toppedUp", "settled", "groupSize", "window", "opensAt")
	s.rdb.Del(s.ctx, rdb.PresaleRankedKey(s.event, 0))
	s.rdb.SetRange(s.ctx, k.PresaleRanks, 8, "garbage!")
	// The dead admitter's lease stands as long as the test needs (a loaded
	// machine may take its time over the step), then lapses: it is made to
	// lapse, and the test waits until Redis has let it go.
	s.rdb.Set(s.ctx, k.PresaleDrawing, "dead-admitter", time.Minute)

	other := s.another("second-admitter")
	if err := other.Step(s.ctx, s.event, s.plan); err != nil {
		t.Fatal(err)
	}
	if sel, _ := other.Selection(s.ctx, s.event, s.plan); sel.Drawn {
		t.Fatal("a second admitter drew while the first one's lease stood")
	}
	s.rdb.PExpire(s.ctx, k.PresaleDrawing, time.Millisecond)
	for s.rdb.Exists(s.ctx, k.PresaleDrawing).Val() != 0 {
		time.Sleep(time.Millisecond)
	}
	if err := other.Step(s.ctx, s.event, s.plan); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := other.Entries(s.ctx, s.event, &again); err != nil {
		t.Fatal(err)
	}
	if again.String() != first.String() || s.rdb.Get(s.ctx, k.PresaleRanks).Val() != ranks {
		t.Fatal("the second admitter's selection differs from the first's")
	}
}

// A join of a presale needs an invited account inside its window, by Redis
// TIME: refused a moment before, let in from its first millisecond; group 1
// waits a window more; the waitlisted and the unregistered are refused;
// after general_sale_at anyone joins.
func TestWindowsOpenByRedisTime(t *testing.T) {
	p := plan(1200*time.Millisecond, 1500*time.Millisecond, 1500*time.Millisecond, 4, 2)
	general := p.OpensAt.Add(4 * time.Second)
	p.GeneralSaleAt = &general
	s := newSale(t, p)
	for i := range 6 {
		s.register(fmt.Sprintf("fan-%d", i))
	}
	s.closeAndDraw()
	byRank := map[int64]string{}
	for i := range 6 {
		a := fmt.Sprintf("fan-%d", i)
		reg, err := s.pre.Status(s.ctx, s.event, s.plan, a)
		if err != nil {
			t.Fatal(err)
		}
		byRank[reg.Rank] = a
	}
	if _, err := s.join(""); !errors.Is(err, presale.ErrAccountRequired) {
		t.Fatalf("join without an account: %v", err)
	}
	if _, err := s.join("stranger"); !errors.Is(err, presale.ErrNotInvited) {
		t.Fatalf("join of an unregistered account: %v", err)
	}
	if _, err := s.join(byRank[5]); !errors.Is(err, presale.ErrNotInvited) {
		t.Fatalf("join of the waitlisted rank 5: %v", err)
	}
	var wno presale.WindowNotOpen
	if _, err := s.join(byRank[1]); !errors.As(err, &wno) || !wno.OpensAt.Equal(p.OpensAt.Truncate(time.Millisecond)) {
		t.Fatalf("join before the window: %v (opens %v), want WindowNotOpen at %v", err, wno.OpensAt, p.OpensAt)
	}
	time.Sleep(time.Until(p.OpensAt) + 2*time.Millisecond)
	for _, r := range []int64{1, 2} {
		if res, err := s.join(byRank[r]); err != nil || res.State != line.Waiting {
			t.Fatalf("rank %d in its window: %+v, %v", r, res, err)
		}
	}
	if _, err := s.join(byRank[3]); !errors.As(err, &wno) || !wno.OpensAt.Equal(p.OpensAt.Add(p.Window).Truncate(time.Millisecond)) {
		t.Fatalf("rank 3 in group 0's window: %v, want its own window at %v", err, p.OpensAt.Add(p.Window))
	}
	time.Sleep(time.Until(p.OpensAt.Add(p.Window)) + 2*time.Millisecond)
	if _, err := s.join(byRank[3]); err != nil {
		t.Fatalf("rank 3 in its window: %v", err)
	}
	time.Sleep(time.Until(general) + 2*time.Millisecond)
	if res, err := s.join("stranger"); err != nil || res.State != line.Waiting {
		t.Fatalf("general sale: %+v, %v", res, err)
	}
}

// A single-use code raced by 50 fans gives exactly one place, on one shard
// and on four, and on a Redis Cluster with the line over its three masters;
// the other 49 are told it is used, and spend nothing else.
func TestSingleUseCodeRaced(t *testing.T) {
	_, cluster := testenv.Cluster(t)
	for _, tc := range []struct {
		name   string
		c      redis.UniversalClient
		shards int
	}{{"shards=1", nil, 1}, {"shards=4", nil, 4}, {"cluster/shards=3", cluster, 3}} {
		shards := tc.shards
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			if c == nil {
				_, c = testenv.Redis(t)
			}
			s := newSaleOn(t, c, plan(time.Minute, time.Minute, time.Hour, 1, 1))
			s.set = line.Settings{Mode: line.ModeQueue, AdmitPerSecond: 100, MaxActive: 100, AccessTTL: time.Minute,
				AbandonAfter: time.Minute, Codes: true, Shards: shards}
			codes, err := s.pre.NewCodes(s.ctx, s.event, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			hash := s.pre.CodeHash(s.event, strings.ToLower(codes[0])+" ")
			var placed, used atomic.Int64
			testenv.Race(50, func(i int) {
				_, err := s.line.JoinWith(s.ctx, s.event, s.set, line.JoinOptions{Code: hash})
				switch {
				case err == nil:
					placed.Add(1)
				case errors.Is(err, presale.ErrCodeUsed):
					used.Add(1)
				default:
					t.Errorf("join %d: %v", i, err)
				}
			})
			if placed.Load() != 1 || used.Load() != 49 {
				t.Fatalf("%d places, %d told used; want 1 and 49", placed.Load(), used.Load())
			}
			counts, err := s.line.Counts(s.ctx, s.event)
			if err != nil || counts.Waiting != 1 {
				t.Fatalf("the line holds %d (%v), want 1", counts.Waiting, err)
			}
			cc, _ := s.pre.CodeCounts(s.ctx, s.event)
			if cc != (presale.CodeCounts{Codes: 1, Uses: 1, Used: 1}) {
				t.Errorf("counts %+v", cc)
			}
			for _, bad := range []struct {
				code string
				want error
			}{{"", presale.ErrCodeRequired}, {"NOPE-NOPE", presale.ErrInvalidCode}, {"bad*code", presale.ErrInvalidCode}} {
				if _, err := s.line.JoinWith(s.ctx, s.event, s.set, line.JoinOptions{Code: s.pre.CodeHash(s.event, bad.code)}); !errors.Is(err, bad.want) {
					t.Errorf("code %q: %v, want %v", bad.code, err, bad.want)
				}
			}
		})
	}
}

// Given codes with many uses: exactly that many places, whatever the race.
func TestGivenCodeUses(t *testing.T) {
	s := newSale(t, plan(time.Minute, time.Minute, time.Hour, 1, 1))
	s.set = line.Settings{Mode: line.ModeQueue, AdmitPerSecond: 100, MaxActive: 100, AccessTTL: time.Minute, AbandonAfter: time.Minute, Codes: true}
	if err := s.pre.AddCodes(s.ctx, s.event, []string{"FANCLUB-2026"}, 7); err != nil {
		t.Fatal(err)
	}
	if err := s.pre.AddCodes(s.ctx, s.event, []string{"ok", "not ok!"}, 1); !errors.Is(err, presale.ErrBadCode) {
		t.Fatalf("a bad code among good ones: %v", err)
	}
	var placed atomic.Int64
	testenv.Race(30, func(int) {
		if _, err := s.line.JoinWith(s.ctx, s.event, s.set, line.JoinOptions{Code: s.pre.CodeHash(s.event, "fanclub2026")}); err == nil {
			placed.Add(1)
		}
	})
	if placed.Load() != 7 {
		t.Fatalf("%d places for a code of 7 uses", placed.Load())
	}
	if cc, _ := s.pre.CodeCounts(s.ctx, s.event); cc != (presale.CodeCounts{Codes: 1, Uses: 7, Used: 7}) {
		t.Errorf("counts %+v (the bad request added nothing)", cc)
	}
}

// stepRace is three admitters stepping the presale at once.
func (s *sale) stepRace() {
	s.t.Helper()
	stores := []*presale.Store{s.pre, s.another("admitter-2"), s.another("admitter-3")}
	testenv.Race(3, func(i int) {
		if err := stores[i].Step(s.ctx, s.event, s.plan); err != nil {
			s.t.Errorf("step %d: %v", i, err)
		}
	})
}

func (s *sale) figures() presale.Figures {
	s.t.Helper()
	f, err := s.pre.Figures(s.ctx, s.event)
	if err != nil {
		s.t.Fatal(err)
	}
	return f
}

// Top-ups: when a window closes, the invitations it left unused go to the
// next ranks, never more than the places left (available, less the fans
// live in line, less the invitations still out), once per window however
// many admitters step at once.
func TestTopUpsNeverAboveThePlacesLeft(t *testing.T) {
	for _, tc := range []struct {
		available     int
		first, second int64 // top-ups at the first and second closes
	}{
		{available: 4, first: 1, second: 2},
		{available: 3, first: 0, second: 2},
		{available: 2, first: 0, second: 1},
	} {
		t.Run(fmt.Sprintf("available=%d", tc.available), func(t *testing.T) {
			s := newSale(t, plan(1200*time.Millisecond, 600*time.Millisecond, 1500*time.Millisecond, 4, 2))
			for i := range 10 {
				s.register(fmt.Sprintf("fan-%d", i))
			}
			s.closeAndDraw()
			s.rdb.HSet(s.ctx, rdb.KeysOf(s.event).Inventory, "available", tc.available, "held", 0, "pending", 0)
			byRank := map[int64]string{}
			for i := range 10 {
				reg, _ := s.pre.Status(s.ctx, s.event, s.plan, fmt.Sprintf("fan-%d", i))
				byRank[reg.Rank] = fmt.Sprintf("fan-%d", i)
			}
			// Group 0: rank 1 comes, rank 2 does not; group 1 (ranks 3
			// and 4) does not come at all.
			time.Sleep(time.Until(s.plan.OpensAt) + 5*time.Millisecond)
			if _, err := s.join(byRank[1]); err != nil {
				t.Fatal(err)
			}
			w := s.plan.Window
			time.Sleep(time.Until(s.plan.OpensAt.Add(w)) + 5*time.Millisecond)
			s.stepRace()
			// Left at the first close: available − 1 live − 2 invitations
			// of group 1 still out; rank 2's one invitation unused.
			if f := s.figures(); f.ToppedUp != tc.first || f.Invited != 4+tc.first {
				t.Fatalf("after group 0's close: %+v, want %d topped up", f, tc.first)
			}
			if tc.first == 1 {
				reg, _ := s.pre.Status(s.ctx, s.event, s.plan, byRank[5])
				if reg.Status != presale.Selected || !reg.WindowOpensAt.Equal(s.plan.OpensAt.Add(w).Truncate(time.Millisecond)) {
					t.Fatalf("rank 5 after the top-up: %+v", reg)
				}
				if _, err := s.join(byRank[5]); err != nil {
					t.Fatalf("rank 5 in its top-up window: %v", err)
				}
			}
			if reg, _ := s.pre.Status(s.ctx, s.event, s.plan, byRank[6]); reg.Status != presale.Waitlisted {
				t.Fatalf("rank 6: %+v", reg)
			}
			// Group 1 (and the top-up) close: 2 unused; left = available −
			// the fans live in line.
			time.Sleep(time.Until(s.plan.OpensAt.Add(2*w)) + 5*time.Millisecond)
			s.stepRace()
			f := s.figures()
			if f.ToppedUp != tc.first+tc.second {
				t.Fatalf("after group 1's close: %+v, want %d topped up in all", f, tc.first+tc.second)
			}
			c, _ := s.line.Counts(s.ctx, s.event)
			if live := c.Waiting + c.Active; live+tc.second > int64(tc.available) {
				t.Fatalf("invited %d beyond the places: available %d, live %d", f.Invited, tc.available, live)
			}
			// Settled once each, whatever the race.
			h := s.rdb.HGetAll(s.ctx, rdb.KeysOf(s.event).Presale).Val()
			settled := 0
			for k := range h {
				if strings.HasPrefix(k, "settled:") {
					settled++
				}
			}
			if h["settled"] != fmt.Sprint(settled) {
				t.Fatalf("settled count %s, %d windows settled", h["settled"], settled)
			}
			if n := s.rdb.LLen(s.ctx, rdb.KeysOf(s.event).PresaleTopUps).Val(); n != int64(min(tc.first, 1)+min(tc.second, 1)) {
				t.Fatalf("%d top-up groups", n)
			}
		})
	}
}

// A window is settled by Redis TIME, as its fans are let in by it: an
// admitter whose clock runs an hour ahead tops up nothing while the window
// is open (its fans may still join), and one on time tops it up once it
// has closed.
func TestTopUpsWaitForTheWindowsClose(t *testing.T) {
	s := newSale(t, plan(1200*time.Millisecond, 300*time.Millisecond, 1500*time.Millisecond, 2, 2))
	for i := range 6 {
		s.register(fmt.Sprintf("fan-%d", i))
	}
	s.closeAndDraw()
	s.rdb.HSet(s.ctx, rdb.KeysOf(s.event).Inventory, "available", 100, "held", 0, "pending", 0)
	ahead := s.another("admitter-an-hour-ahead")
	ahead.Now = func() time.Time { return time.Now().Add(time.Hour) }
	time.Sleep(time.Until(s.plan.OpensAt) + 5*time.Millisecond)
	if err := ahead.Step(s.ctx, s.event, s.plan); err != nil {
		t.Fatal(err)
	}
	if f := s.figures(); f.ToppedUp != 0 || f.Invited != 2 {
		t.Fatalf("while the window is open by Redis TIME, an admitter an hour ahead settled it: %+v", f)
	}
	if n := s.rdb.HGet(s.ctx, rdb.KeysOf(s.event).Presale, "settled").Val(); n != "" && n != "0" {
		t.Fatalf("%s windows settled while open", n)
	}
	time.Sleep(time.Until(s.plan.OpensAt.Add(s.plan.Window)) + 5*time.Millisecond)
	if err := ahead.Step(s.ctx, s.event, s.plan); err != nil {
		t.Fatal(err)
	}
	// Nobody came: both invitations unused, both go to the next ranks.
	if f := s.figures(); f.ToppedUp != 2 || f.Invited != 4 {
		t.Fatalf("after the close by Redis TIME: %+v; want 2 topped up", f)
	}
}

// The invited who left an address are emailed their window once, however
// many admitters step at once; the waitlisted and those without an address
// are not.
func TestInvitedAreEmailedOnce(t *testing.T) {
	s := newSale(t, plan(3*time.Second, time.Hour, time.Hour, 3, 3))
	outbox := notify.NewOutbox(rdb.New(s.rdb))
	for i := range 6 {
		a := fmt.Sprintf("fan-%d", i)
		s.register(a)
		if i < 5 {
			if err := s.pre.Remember(s.ctx, s.event, a, a+"@example.com", "ja"); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.closeAndDraw()
	stores := []*presale.Store{s.pre, s.another("admitter-2"), s.another("admitter-3")}
	testenv.Race(3, func(i int) {
		stores[i].MailInvitations(outbox)
		if err := stores[i].Step(s.ctx, s.event, s.plan); err != nil {
			t.Errorf("step %d: %v", i, err)
		}
	})
	want := int64(0)
	for i := range 6 {
		reg, err := s.pre.Status(s.ctx, s.event, s.plan, fmt.Sprintf("fan-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		st, err := outbox.State(s.ctx, s.event, notify.KindPresaleSelected+":"+reg.ID)
		if err != nil {
			t.Fatal(err)
		}
		mailed := reg.Status == presale.Selected && i < 5
		if mailed {
			want++
		}
		if (st == "queued") != mailed {
			t.Errorf("fan-%d (%s, rank %d): its email %q", i, reg.Status, reg.Rank, st)
		}
	}
	if n, _ := outbox.Pending(s.ctx, s.event); n != want || want == 0 {
		t.Fatalf("%d emails queued, want %d", n, want)
	}
}

// The selection's seed is not in Redis before the draw (DESIGN.md, Fair
// play, third round): a reader of every key while registration is open
// finds neither the seed (raw or hex) nor anything that gives it; once
// drawn, the seed and the nonce are published, and the seed is HMAC-SHA256
// of the draw secret over the event, the kind and the nonce, whose SHA-256
// is the commitment.
func TestSelectionSeedNotInRedisBeforeTheDraw(t *testing.T) {
	s := newSale(t, plan(1200*time.Millisecond, time.Minute, time.Hour, 3, 3))
	for i := range 8 {
		s.register(fmt.Sprintf("fan-%d", i))
	}
	if err := s.pre.Withdraw(s.ctx, s.event, s.plan, "fan-0"); err != nil {
		t.Fatal(err)
	}
	before, err := atrest.Dump(s.ctx, s.rdb.(*redis.Client))
	if err != nil {
		t.Fatal(err)
	}
	s.closeAndDraw()
	sel, err := s.pre.Selection(s.ctx, s.event, s.plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := atrest.CheckDerived(before, drawSecret, atrest.Draw{Event: s.event, Kind: "selection", Seed: sel.Seed, Nonce: sel.Nonce, Commitment: sel.Commitment}); err != nil {
		t.Error(err)
	}
	// A store without the secret commits and draws nothing.
	bare := presale.New(rdb.New(s.rdb), s.line, secret, "no-secret")
	if _, _, err := bare.Register(s.ctx, "other", plan(time.Minute, time.Minute, time.Hour, 1, 1), "fan"); !errors.Is(err, draw.ErrNoSecret) {
		t.Errorf("a registration with no draw secret: %v; want draw.ErrNoSecret", err)
	}
}

// Withdrawing moves nothing (DESIGN.md, Fair play, third round): a
// registration withdrawn before the close stays an entry of the selection,
// listed and ranked, so no withdrawal changes the digest (one who read
// Redis could otherwise try subsets of throwaway registrations to withdraw
// and steer the key); its rank is skipped when invitations go out: nobody
// holds it, nobody is emailed for it, and it counts as unused when its
// window closes (docs/QUEUE.md).
func TestWithdrawingMovesNothing(t *testing.T) {
	s := newSale(t, plan(1500*time.Millisecond, time.Hour, time.Hour, 20, 20))
	outbox := notify.NewOutbox(rdb.New(s.rdb))
	s.pre.MailInvitations(outbox)
	var all []string // every registration made, withdrawn ones too
	for i := range 12 {
		a := fmt.Sprintf("fan-%d", i)
		all = append(all, s.register(a))
		if err := s.pre.Remember(s.ctx, s.event, a, a+"@example.com", "en"); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []string{"fan-1", "fan-2"} {
		if err := s.pre.Withdraw(s.ctx, s.event, s.plan, a); err != nil {
			t.Fatal(err)
		}
	}
	again := s.register("fan-2") // a new registration, a new entry
	all = append(all, again)
	s.closeAndDraw()
	if err := s.pre.Step(s.ctx, s.event, s.plan); err != nil { // the invitations' emails
		t.Fatal(err)
	}
	sel, err := s.pre.Selection(s.ctx, s.event, s.plan)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	if err := s.pre.Entries(s.ctx, s.event, &w); err != nil {
		t.Fatal(err)
	}
	list := strings.Fields(w.String())
	if sel.Entries != int64(len(all)) || len(list) != len(all) || sel.EntriesDigest != hex.EncodeToString(draw.Digest(all)) {
		t.Fatalf("%d entries said, %d listed, digest %s; want all %d registrations made, withdrawn ones too, digest %x",
			sel.Entries, len(list), sel.EntriesDigest, len(all), draw.Digest(all))
	}
	if err := presaletest.CheckDraw(sel.Seed, sel.Commitment, sel.EntriesDigest, w.Bytes()); err != nil {
		t.Fatal(err)
	}
	rank := map[string]int64{}
	for i, id := range list {
		rank[id] = int64(i + 1)
	}
	if _, err := s.pre.Status(s.ctx, s.event, s.plan, "fan-1"); !errors.Is(err, presale.ErrNotRegistered) {
		t.Errorf("a withdrawn account's status: %v; want ErrNotRegistered", err)
	}
	if reg, err := s.pre.Status(s.ctx, s.event, s.plan, "fan-2"); err != nil || reg.ID != again || reg.Rank != rank[again] || reg.Status != presale.Selected {
		t.Errorf("fan-2 registered again: %+v, %v; want %s at rank %d, selected", reg, err, again, rank[again])
	}
	// Every rank is invited (20 for 13 entries); the withdrawn ones are
	// skipped: no email, no way in.
	for i, id := range all {
		st, err := outbox.State(s.ctx, s.event, notify.KindPresaleSelected+":"+id)
		if err != nil {
			t.Fatal(err)
		}
		withdrawn := i == 1 || i == 2
		if (st == "queued") == withdrawn {
			t.Errorf("registration %d (%s, withdrawn %v, rank %d): its email %q", i, id, withdrawn, rank[id], st)
		}
	}
	if f := s.figures(); f.Registrations != 11 || f.Selected != 13 {
		t.Errorf("figures %+v; want 11 registrations standing and 13 ranks invited", f)
	}
}

// An account registers at most 3 times per event, withdrawals included:
// the fourth is refused (429 rate_limited at the edge) and changes
// nothing; registering again while registered is the same registration
// and counts once. That also bounds the rank table (4 bytes a registration
// made) by the accounts, not by how long one account cycles.
func TestThreeRegistrationsPerAccount(t *testing.T) {
	s := newSale(t, plan(time.Minute, time.Minute, time.Hour, 10, 10))
	first := s.register("cycler")
	if again := s.register("cycler"); again != first {
		t.Fatalf("registering again while registered: %q, want the same %q", again, first)
	}
	for i := range 2 {
		if err := s.pre.Withdraw(s.ctx, s.event, s.plan, "cycler"); err != nil {
			t.Fatal(err)
		}
		s.register("cycler") // the second and the third
		_ = i
	}
	if err := s.pre.Withdraw(s.ctx, s.event, s.plan, "cycler"); err != nil {
		t.Fatal(err)
	}
	k := rdb.KeysOf(s.event)
	before := s.rdb.LLen(s.ctx, k.PresaleLog).Val()
	if _, _, err := s.pre.Register(s.ctx, s.event, s.plan, "cycler"); !errors.Is(err, presale.ErrTooManyRegistrations) {
		t.Fatalf("a fourth registration: %v; want ErrTooManyRegistrations", err)
	}
	if n := s.rdb.LLen(s.ctx, k.PresaleLog).Val(); n != before {
		t.Fatalf("a refused registration wrote the log: %d entries, %d before", n, before)
	}
	if _, err := s.pre.Status(s.ctx, s.event, s.plan, "cycler"); !errors.Is(err, presale.ErrNotRegistered) {
		t.Fatalf("status after the refusal: %v; want ErrNotRegistered", err)
	}
	// Another account is not held to this one's count.
	s.register("other")
}

// One account's many devices registering and withdrawing at once never
// make more than 3 registrations.
func TestRegistrationLimitRaced(t *testing.T) {
	s := newSale(t, plan(time.Minute, time.Minute, time.Hour, 10, 10))
	testenv.Race(48, func(i int) {
		for range 4 {
			if i%2 == 0 {
				_, _, err := s.pre.Register(s.ctx, s.event, s.plan, "racer")
				if err != nil && !errors.Is(err, presale.ErrTooManyRegistrations) {
					t.Errorf("register: %v", err)
				}
			} else if err := s.pre.Withdraw(s.ctx, s.event, s.plan, "racer"); err != nil && !errors.Is(err, presale.ErrNotRegistered) {
				t.Errorf("withdraw: %v", err)
			}
		}
	})
	made := 0
	for _, e := range s.rdb.LRange(s.ctx, rdb.KeysOf(s.event).PresaleLog, 0, -1).Val() {
		if strings.HasSuffix(e, " racer") {
			made++
		}
	}
	if made == 0 || made > 3 {
		t.Fatalf("%d registrations made by one account; want 1 to 3", made)
	}
}

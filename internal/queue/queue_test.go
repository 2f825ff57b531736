package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

const event = "premiere"

var secret = []byte("test-ticket-secret-0123456789")

// drawSecret is the tests' auth.draw_secret: the lottery's seed is derived
// from it.
var drawSecret = []byte("test-draw-secret-0123456789abcdef")

// counter is a go-redis hook counting every command sent, so a test can
// prove a path never touched Redis.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

type env struct {
	store   *queue.Store
	rdb     redis.UniversalClient
	cmds    *counter
	cluster bool
	shards  int // the line's layout: 1, or spread over that many shards
}

// backend is a kind of Redis the store runs on, and the line's layout.
type backend struct {
	name    string
	cluster bool
	client  func(t testing.TB) redis.UniversalClient
	shards  int
}

// backends: the important tests run on both, since production may be either
// (config redis.url: a URL, or a cluster's seed list).
var backends = []backend{
	{"single", false, singleClient, 1},
	{"cluster", true, clusterClient, 1},
}

// sharded are the same two with the line spread over three shards
// (admission.shards: 3): on the cluster, one per master.
var sharded = []backend{
	{"single/3-shards", false, singleClient, 3},
	{"cluster/3-shards", true, clusterClient, 3},
}

func singleClient(t testing.TB) redis.UniversalClient  { _, rdb := testenv.Redis(t); return rdb }
func clusterClient(t testing.TB) redis.UniversalClient { _, rdb := testenv.Cluster(t); return rdb }

// setup gives a test a store on a private single redis-server.
func setup(t testing.TB) env { return setupOn(t, backends[0]) }

// setupOn gives a test a store on a private Redis of kind b.
func setupOn(t testing.TB, b backend) env {
	t.Helper()
	rdb := b.client(t)
	c := &counter{}
	rdb.AddHook(c)
	return env{store: queue.NewStore(rdb, secret).WithDrawSecret(drawSecret), rdb: rdb, cmds: c, cluster: b.cluster, shards: max(b.shards, 1)}
}

// onEachLayout runs test as onEach does, then again with the line spread
// over three shards on both.
func onEachLayout(t *testing.T, test func(t *testing.T, e env)) {
	t.Helper()
	for _, b := range append(append([]backend(nil), backends...), sharded...) {
		t.Run(b.name, func(t *testing.T) { test(t, setupOn(t, b)) })
	}
}

// open is open() in the env's layout.
func (e env) open() line.Settings {
	set := open()
	set.Shards = e.shards
	return set
}

// state is the event's line as Redis holds it, in the env's layout.
func (e env) state(t testing.TB) queuetest.Line {
	return queuetest.Of(t, e.rdb, event).Spread(e.shards)
}

// eachMaster runs f on every node of e's Redis that holds keys: each
// master of a cluster (at once), or the one server.
func (e env) eachMaster(t testing.TB, f func(ctx context.Context, c *redis.Client) error) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch c := e.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, f)
	case *redis.Client:
		err = f(ctx, c)
	default:
		t.Fatalf("a Redis client of type %T", e.rdb)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// line is the event's whole line, front first, read from every wait ZSET.
func (e env) line(t testing.TB) []string {
	t.Helper()
	return e.state(t).Waiting()
}

// onEach runs test on a single redis-server and on a three-master Redis
// Cluster, as subtests "single" and "cluster".
func onEach(t *testing.T, test func(t *testing.T, e env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, setupOn(t, b)) })
	}
}

// onSharded runs test on each backend with the line spread over three
// shards.
func onSharded(t *testing.T, test func(t *testing.T, e env)) {
	t.Helper()
	for _, b := range sharded {
		t.Run(b.name, func(t *testing.T) { test(t, setupOn(t, b)) })
	}
}

// open is the settings of an event open now, in queue mode.
func open() line.Settings {
	return line.Settings{
		Mode:           "queue",
		AdmitPerSecond: 50,
		MaxActive:      200,
		AccessTTL:      10 * time.Minute,
		AbandonAfter:   60 * time.Second,
	}
}

func at(d time.Duration) *time.Time {
	t := time.Now().Add(d)
	return &t
}

func join(t testing.TB, s *queue.Store, set line.Settings) line.JoinResult {
	t.Helper()
	r, err := s.Join(context.Background(), event, set)
	return mustValue(t, "join", r, err)
}

func status(t testing.TB, s *queue.Store, tk line.Ticket, set line.Settings) line.Status {
	t.Helper()
	st, err := s.Status(context.Background(), event, tk, set)
	return mustValue(t, "status", st, err)
}

func tick(t testing.TB, s *queue.Store, set line.Settings) line.TickResult {
	t.Helper()
	r, err := s.Tick(context.Background(), event, set)
	return mustValue(t, "tick", r, err)
}

// mustValue is v, or the end of the test, naming what failed, when err is set.
func mustValue[T any](t testing.TB, what string, v T, err error) T {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// prequeue is set with its pre-queue open a minute ago and the sale
// opening in an hour.
func prequeue(set line.Settings) line.Settings {
	set.PrequeueOpensAt, set.OpensAt = at(-time.Minute), at(time.Hour)
	return set
}

// letIn ticks twice, 10 ms apart: a bucket's first tick only sets its
// clock, the second has its tokens (ten at 1,000/s), so those in line are
// let in, up to the rate's and the cap's room.
func letIn(t testing.TB, s *queue.Store, set line.Settings) {
	t.Helper()
	tick(t, s, set)
	time.Sleep(10 * time.Millisecond)
	tick(t, s, set)
}

// joinAndLetIn joins a fan and lets it in (letIn: set admits at 1,000/s).
func joinAndLetIn(t testing.TB, s *queue.Store, set line.Settings) line.JoinResult {
	t.Helper()
	r := join(t, s, set)
	letIn(t, s, set)
	return r
}

// checkBooks asserts the invariant every ticket obeys: it is admitted,
// waiting, left or abandoned, exactly once.
func checkBooks(t testing.TB, e env) line.Stats {
	t.Helper()
	ctx := context.Background()
	st, err := e.store.Stats(ctx, event)
	if err != nil {
		t.Fatal(err)
	}
	waiting := int64(len(e.line(t)))
	if got := st.Admitted + waiting + st.Left + st.Abandoned; got != st.Joined {
		t.Errorf("admitted %d + waiting %d + left %d + abandoned %d = %d; want joined %d",
			st.Admitted, waiting, st.Left, st.Abandoned, got, st.Joined)
	}
	return st
}

// sendsNothing runs f and fails t if f sent Redis a command: what the edge
// refuses (a bad ticket, a malformed id) never reaches Redis.
func (e env) sendsNothing(t testing.TB, what string, f func()) {
	t.Helper()
	before := e.cmds.n.Load()
	f()
	if n := e.cmds.n.Load() - before; n != 0 {
		t.Errorf("%s sent %d Redis commands; want 0", what, n)
	}
}

// seqOf is the sequence number in front of a ticket id (base 36).
func seqOf(t testing.TB, id string) int64 {
	t.Helper()
	head, _, _ := strings.Cut(id, ".")
	n, err := strconv.ParseInt(head, 36, 64)
	if err != nil {
		t.Fatalf("ticket id %q: %v", id, err)
	}
	return n
}

func TestBadTicketsNeverReachRedis(t *testing.T) { onEach(t, testBadTicketsNeverReachRedis) }

// testBadTicketsNeverReachRedis: a ticket is checked where it comes in
// (the gateway's line.Codec.Parse, with the store's secret): a bad one is
// refused there, and what the edge has then, no Ticket, is
// ErrInvalidTicket at the store, before any Redis command.
func testBadTicketsNeverReachRedis(t *testing.T, e env) {
	ctx := context.Background()
	codec := line.NewCodec(secret)
	good := join(t, e.store, open()).Ticket.String()
	other, err := e.store.Join(ctx, "other-event", open())
	if err != nil {
		t.Fatal(err)
	}
	forged := []byte(good)
	i := len(forged) / 2
	if forged[i] == 'A' {
		forged[i] = 'B'
	} else {
		forged[i] = 'A'
	}
	otherSecret := queue.NewStore(e.rdb, []byte("another-secret-0123456789"))
	foreign := join(t, otherSecret, open()).Ticket.String()

	cases := []struct{ name, ticket string }{
		{"empty", ""},
		{"garbage", "hello"},
		{"not base64", strings.Repeat("*", len(good))},
		{"forged byte", string(forged)},
		{"truncated", good[:len(good)-1]},
		{"truncated half", good[:len(good)/2]},
		{"extended", good + "A"},
		{"padded", good + "=="},
		{"other event", other.Ticket.String()},
		{"other secret", foreign},
		{"an id, not a ticket", join(t, e.store, open()).ID},
		{"huge", strings.Repeat("A", 1<<16)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.sendsNothing(t, "a bad ticket", func() {
				tk, err := codec.Parse(event, c.ticket)
				if !errors.Is(err, line.ErrInvalidTicket) || !tk.IsZero() {
					t.Errorf("Parse = %v, %v; want no ticket, ErrInvalidTicket", tk.ID(), err)
				}
				if _, err := e.store.Status(ctx, event, tk, open()); !errors.Is(err, line.ErrInvalidTicket) {
					t.Errorf("Status = %v; want ErrInvalidTicket", err)
				}
				if err := e.store.Leave(ctx, event, tk); !errors.Is(err, line.ErrInvalidTicket) {
					t.Errorf("Leave = %v; want ErrInvalidTicket", err)
				}
				if _, err := e.store.TicketDraw(ctx, event, tk); !errors.Is(err, line.ErrInvalidTicket) {
					t.Errorf("TicketDraw = %v; want ErrInvalidTicket", err)
				}
				if err := e.store.StepAway(ctx, line.AwayRequest{Event: event, Settings: open(), Ticket: tk, Account: "a", Email: "a@example.test", Lang: "en"}); !errors.Is(err, line.ErrInvalidTicket) {
					t.Errorf("StepAway = %v; want ErrInvalidTicket", err)
				}
			})
		})
	}
	t.Run("good ticket passes", func(t *testing.T) {
		tk, err := codec.Parse(event, good)
		if err != nil {
			t.Fatalf("Parse(good) = %v", err)
		}
		if st := status(t, e.store, tk, open()); st.State != line.Waiting {
			t.Errorf("Status(good) = %s; want waiting", st.State)
		}
	})
	t.Run("bad ids are never active", func(t *testing.T) {
		e.sendsNothing(t, "bad ids", func() {
			for _, id := range []string{"", "x", good, "1.short", "1." + strings.Repeat("A", 23)} {
				if ok, err := e.store.Active(ctx, event, id); ok || err != nil {
					t.Errorf("Active(%q) = %v, %v; want false, nil", id, ok, err)
				}
				if err := e.store.SetReturn(ctx, event, id, "https://shop.example/", time.Minute); !errors.Is(err, line.ErrInvalidTicket) {
					t.Errorf("SetReturn(%q) = %v; want ErrInvalidTicket", id, err)
				}
			}
		})
	})
}

func TestConcurrentJoins(t *testing.T) { onEachLayout(t, testConcurrentJoins) }

func testConcurrentJoins(t *testing.T, e env) {
	const n = 2000
	set := e.open()
	results, errs := make([]line.JoinResult, n), make([]error, n)
	sent := e.cmds.n.Load()
	testenv.Race(n, func(i int) {
		for {
			results[i], errs[i] = e.store.Join(context.Background(), event, set)
			// A sharded place whose second step reached its shard too late
			// (a starved machine) is never made: its fan is answered 503
			// and joins again (docs/QUEUE.md, "No overtaking, many shards").
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "reached its shard too late") {
				return
			}
		}
	})
	if cmds := e.cmds.n.Load() - sent; e.shards == 1 && cmds >= n {
		t.Errorf("%d joins took %d commands; want concurrent joins to share script calls", n, cmds)
	}

	tickets, ids, positions := map[string]bool{}, map[string]bool{}, map[int64]bool{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("join %d: %v", i, errs[i])
		}
		tickets[r.Ticket.String()], ids[r.ID] = true, true
		if r.State != line.Waiting {
			t.Errorf("join %d = %+v; want a new waiting ticket", i, r)
		}
		p := r.Position.Position
		if e.shards > 1 {
			// A sharded join counts the other shards as they are at that
			// instant, without the joins still in flight there; the first
			// poll is exact.
			p = status(t, e.store, r.Ticket, set).Position.Position
		}
		positions[p] = true
	}
	if len(tickets) != n || len(ids) != n {
		t.Errorf("%d distinct tickets, %d distinct ids; want %d", len(tickets), len(ids), n)
	}
	for p := int64(1); p <= n; p++ {
		if !positions[p] {
			t.Fatalf("position %d missing: positions are not a permutation of 1..%d", p, n)
		}
	}
	if got := len(e.line(t)); got != n {
		t.Errorf("%d in line; want %d", got, n)
	}
	if st := checkBooks(t, e); st.Joined != n {
		t.Errorf("joined = %d; want %d", st.Joined, n)
	}
}

// A join after opening takes its rank from the count of the line when the
// line's last score is below its number, and asks ZRANK when it is not: a
// member with a higher score (put there by hand, say) is behind the new
// places, and every position is still exact.
func TestJoinRankBehindAHigherTail(t *testing.T) {
	e := setup(t)
	set := open()
	ctx := context.Background()
	if p := join(t, e.store, set).Position.Position; p != 1 {
		t.Fatalf("the first join: position %d; want 1", p)
	}
	wait := e.state(t).Keys().Wait
	if err := e.rdb.ZAdd(ctx, wait, redis.Z{Score: 1e12, Member: "zz.far-behind"}).Err(); err != nil {
		t.Fatal(err)
	}
	for want := int64(2); want <= 4; want++ {
		if p := join(t, e.store, set).Position.Position; p != want {
			t.Errorf("a join before a higher tail: position %d; want %d", p, want)
		}
	}
	// Together (one script call), in front of it all the same.
	positions := make([]int64, 20)
	testenv.Race(len(positions), func(i int) { positions[i] = join(t, e.store, set).Position.Position })
	slices.Sort(positions)
	for i, p := range positions {
		if p != int64(5+i) {
			t.Fatalf("joins together before a higher tail: positions %v; want 5…24", positions)
		}
	}
	if err := e.rdb.ZRem(ctx, wait, "zz.far-behind").Err(); err != nil {
		t.Fatal(err)
	}
	if p := join(t, e.store, set).Position.Position; p != 25 {
		t.Errorf("a join at the tail again: position %d; want 25", p)
	}
}

// frontActive is how many tickets are active, and the first of order whose
// being active or not disagrees with its place (-1: the active ones are
// exactly the first of order).
func frontActive(t testing.TB, e env, order []string) (active int64, wrong int) {
	t.Helper()
	l := e.state(t)
	active = l.ActiveCount()
	for i, id := range order {
		if in := l.IsActive(id); in != (int64(i) < active) {
			return active, i
		}
	}
	return active, -1
}

// admitInSteps raises the cap by step at each tick until nobody waits,
// and fails the test as soon as a tick lets in anyone but the front of
// order (admission is not in the order's sense, what).
func admitInSteps(t *testing.T, e env, set line.Settings, step int, order []string, what string) {
	t.Helper()
	for n := 1; len(e.line(t)) > 0; n++ {
		set.MaxActive += step
		time.Sleep(2 * time.Millisecond)
		tick(t, e.store, set)
		if active, i := frontActive(t, e, order); i >= 0 {
			t.Fatalf("step %d: fan %d of the order active=%v with %d active; admission is not %s", n, i, int64(i) >= active, active, what)
		}
		if n > len(order)/step+10 {
			t.Fatal("the line does not empty")
		}
	}
}

func TestFIFOAfterOpening(t *testing.T) { onEachLayout(t, testFIFOAfterOpening) }

func testFIFOAfterOpening(t *testing.T, e env) {
	set := e.open()
	set.AdmitPerSecond = 1e6 // the bucket is never the limit
	set.MaxActive = 1 << 30
	const n = 300
	ids := make([]string, n)
	for i := range ids {
		ids[i] = join(t, e.store, set).ID
	}
	if inv := inversions(rankOf(ids, e.line(t))); inv != 0 {
		t.Errorf("%d inversions in the line; want 0", inv)
	}

	// Admission follows the line: admit in small steps and check that every
	// step takes the front.
	set.MaxActive = 0
	admitInSteps(t, e, set, 7, ids, "FIFO")
	checkBooks(t, e)
}

func TestPrequeueLottery(t *testing.T) {
	e := setup(t)
	pre := prequeue(open())
	const n = 1000
	ids := make([]string, n)
	for i := range ids {
		r := join(t, e.store, pre)
		if r.ETA != nil {
			t.Fatalf("pre-queue join told ETA %v; want none before opening", *r.ETA)
		}
		ids[i] = r.ID
	}
	// After opening, joins go behind every pre-queue fan, in FIFO order.
	opened := open()
	opened.PrequeueOpensAt, opened.OpensAt = at(-2*time.Hour), at(-time.Hour)
	late := make([]string, 50)
	for i := range late {
		r := join(t, e.store, opened)
		late[i] = r.ID
		if got := status(t, e.store, r.Ticket, opened); got.Position.Position != int64(n+i+1) {
			t.Fatalf("post-opening join %d at position %d; want %d", i, got.Position.Position, n+i+1)
		}
	}
	line := e.line(t)
	if err := randomOrder(rankOf(ids, line[:n])); err != nil {
		t.Errorf("pre-queue order: %v", err)
	}
	if inv := inversions(rankOf(late, line[n:])); inv != 0 {
		t.Errorf("post-opening order has %d inversions; want 0", inv)
	}

	// The test has teeth: join order and reverse join order both fail it.
	identity, reverse := make([]int, n), make([]int, n)
	for i := range identity {
		identity[i], reverse[i] = i, n-1-i
	}
	for name, order := range map[string][]int{"join order": identity, "reverse order": reverse} {
		if randomOrder(order) == nil {
			t.Errorf("randomOrder accepted %s", name)
		}
	}
	checkBooks(t, e)
}

// rankOf maps line (ids in line order) to the join index of each.
func rankOf(joinOrder, line []string) []int {
	idx := make(map[string]int, len(joinOrder))
	for i, id := range joinOrder {
		idx[id] = i
	}
	out := make([]int, len(line))
	for i, id := range line {
		out[i] = idx[id]
	}
	return out
}

func inversions(a []int) int {
	n := 0
	for i := range a {
		for j := i + 1; j < len(a); j++ {
			if a[i] > a[j] {
				n++
			}
		}
	}
	return n
}

// randomOrder is a Spearman rank test: for a uniformly random permutation of
// n the rank correlation between join order and line order has mean 0 and
// standard deviation 1/√(n−1); |ρ| > 4.5σ happens with probability < 1e-5.
// Join order (ρ = 1) and reverse order (ρ = −1) fail it.
func randomOrder(order []int) error {
	n := float64(len(order))
	var d2 float64
	for pos, joined := range order {
		d := float64(pos - joined)
		d2 += d * d
	}
	rho := 1 - 6*d2/(n*(n*n-1))
	if limit := 4.5 / math.Sqrt(n-1); rho > limit || rho < -limit {
		return fmt.Errorf("rank correlation %.3f beyond ±%.3f: not a random order", rho, limit)
	}
	return nil
}

func TestConcurrentPolls(t *testing.T) { onEachLayout(t, testConcurrentPolls) }

// testConcurrentPolls: polls that reach Redis together (one script call
// for the lot, on one shard) each get their own ticket's answer, exactly as
// alone: the exact place of a waiting fan, its abandon deadline renewed,
// the admission of an admitted one claimed once, a left one expired.
func testConcurrentPolls(t *testing.T, e env) {
	const n, rounds = 400, 3
	ctx := context.Background()
	set := e.open()
	fans := make([]line.JoinResult, n)
	for i := range fans {
		fans[i] = join(t, e.store, set)
	}
	set.AdmitPerSecond = 1000
	var admittedN int64
	for try := 0; try < 5 && admittedN == 0; try++ {
		admittedN += tick(t, e.store, set).Admitted
		time.Sleep(20 * time.Millisecond)
	}
	if admittedN == 0 || admittedN >= n/2 {
		t.Fatalf("ticks admitted %d; want some, not half the line", admittedN)
	}
	left := map[string]bool{}
	for i := n - 1; i >= 0; i -= 7 {
		if err := e.store.Leave(ctx, event, fans[i].Ticket); err != nil {
			t.Fatal(err)
		}
		left[fans[i].ID] = true
	}
	place := map[string]int64{} // id → exact position
	for i, id := range e.line(t) {
		place[id] = int64(i + 1)
	}
	active := e.state(t).Active()
	admitted := map[string]bool{}
	for _, id := range active {
		admitted[id] = true
	}
	// One shard: the waiting fans' abandon deadlines are set back to 1970,
	// so that the polls' writes show.
	if e.shards == 1 {
		for _, f := range fans {
			if !left[f.ID] && !admitted[f.ID] {
				if err := e.rdb.BitField(ctx, e.state(t).Keys().Seen, "SET", "u32", seenSlot(t, f.ID), 2).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	sent := e.cmds.n.Load()
	claims := map[string]int{}
	for round := range rounds {
		got, errs := make([]line.Status, n), make([]error, n)
		testenv.Race(n, func(i int) {
			got[i], errs[i] = e.store.Status(ctx, event, fans[i].Ticket, set)
		})
		for i, f := range fans {
			st := got[i]
			switch {
			case errs[i] != nil:
				t.Fatalf("round %d, poll %d: %v", round, i, errs[i])
			case st.ID != f.ID:
				t.Fatalf("round %d: poll of %s answered for %s", round, f.ID, st.ID)
			case left[f.ID]:
				if st.State != line.Expired {
					t.Errorf("round %d: %s left; status %s", round, f.ID, st.State)
				}
			case admitted[f.ID]:
				if st.State != line.Admitted {
					t.Errorf("round %d: %s admitted; status %s", round, f.ID, st.State)
				}
				if st.FirstAdmission {
					claims[f.ID]++
				}
			default:
				if st.State != line.Waiting || st.Position.Position != place[f.ID] || st.Ahead != place[f.ID]-1 {
					t.Errorf("round %d: %s = %s at %d (%d ahead); want waiting at %d", round, f.ID, st.State, st.Position.Position, st.Ahead, place[f.ID])
				}
			}
		}
	}
	for id := range admitted {
		if claims[id] != 1 {
			t.Errorf("%s claimed %d times; want once", id, claims[id])
		}
	}
	polls := int64(rounds * n)
	if e.shards > 1 {
		return
	}
	if cmds := e.cmds.n.Load() - sent; cmds >= polls {
		t.Errorf("%d polls took %d commands; want concurrent polls to share script calls", polls, cmds)
	}
	// Every waiting fan's deadline was written: now + pollAfter +
	// abandon_after, so well past now.
	now := time.Now().Unix()
	for _, f := range fans {
		if left[f.ID] || admitted[f.ID] {
			continue
		}
		v, err := e.rdb.BitField(ctx, e.state(t).Keys().Seen, "GET", "u32", seenSlot(t, f.ID)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if d := v[0]; d < now+int64(set.AbandonAfter.Seconds()) {
			t.Errorf("%s: abandon deadline %d; want at least now %d + abandon_after", f.ID, d, now)
		}
	}
}

// seenSlot is a one-shard ticket's slot in the seen key: #<seq>, the seq
// being the id's base-36 prefix.
func seenSlot(t testing.TB, id string) string {
	t.Helper()
	return "#" + strconv.FormatInt(seqOf(t, id), 10)
}

// pollAllocs is what a lone waiting fan's poll may allocate in the store,
// the Redis client included: 44 today (57 before the hot scripts' shared
// arguments were built once and a call alone went unwrapped, 48 before the
// status script answered a waiting fan with one number, docs/EDGE.md),
// with a little room for the client's versions.
const pollAllocs = 47

// TestPollAllocations holds the poll to its allocation budget, so that a
// change that adds allocations to every poll shows.
func TestPollAllocations(t *testing.T) {
	if queue.RaceEnabled {
		t.Skip("allocation budgets are checked without -race (make test runs them so)")
	}
	e := setup(t)
	set := e.open()
	r := join(t, e.store, set)
	status(t, e.store, r.Ticket, set) // the script is loaded, the connection made
	n := testing.AllocsPerRun(200, func() {
		if st := status(t, e.store, r.Ticket, set); st.State != line.Waiting {
			t.Fatalf("status = %s; want waiting", st.State)
		}
	})
	t.Logf("a poll allocates %v times", n)
	if n > pollAllocs {
		t.Errorf("a poll allocates %v times; want at most %d", n, pollAllocs)
	}
}

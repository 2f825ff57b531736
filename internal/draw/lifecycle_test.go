package draw_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// toyStep is the smallest kind of draw: its entries a list, committed from
// ARGV[1] on, frozen at ARGV[2], done when published.
//
// KEYS: 1 hash, 2 entries
// ARGV: 1 opens ms, 2 freezes ms, 3 nonce, 4 commitment
var toyStep = rdb.NewLibrary("draw_toy", rdb.Prelude, draw.Lua).Script("step", `
local function freeze(now) return redis.call('LLEN', KEYS[2]), tonumber(ARGV[2]) end
local r = draw_step(KEYS[1], 'drawn', clock(), tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[4], ARGV[3], freeze)
r[#r + 1] = 'mine'
return r
`)

type toy struct {
	c     *rdb.Client
	rc    *redis.Client
	k     rdb.DrawKeys
	list  string
	opens time.Time
	drawn time.Time
}

var toySecret = draw.Secret("the toy's draw secret, 32 bytes+")

func (y toy) step(t *testing.T) draw.Step {
	t.Helper()
	nonce, commitment, err := toySecret.Commit("toy", draw.Lottery)
	if err != nil {
		t.Fatal(err)
	}
	v, err := y.c.Run(context.Background(), rdb.Call{Script: toyStep, Keys: []string{y.k.Hash, y.list},
		Args: []any{y.opens.UnixMilli(), y.drawn.UnixMilli(), nonce, commitment}}).Slice()
	if err != nil {
		t.Fatal(err)
	}
	st, err := draw.StepOf(v)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rest.Str(0) != "mine" || st.Rest.Err() != nil {
		t.Fatalf("the kind's own reply: %v", v)
	}
	return st
}

// The lifecycle, once for every kind: many callers race to commit and
// exactly one commitment stands; the entries freeze at their time and
// never grow; many drawers race and the draw is published once, with the
// kind's own writes and fields; the published face hides the seed until
// then; everything is recomputable from what is published.
func TestLifecycle(t *testing.T) {
	_, rc := testenv.Redis(t)
	ctx := context.Background()
	now := time.Now()
	y := toy{c: rdb.New(rc), rc: rc, k: rdb.LotteryDraw("toy"), list: "wr:{toy}:toy-entries",
		opens: now.Add(-time.Second), drawn: now.Add(700 * time.Millisecond)}

	early := y
	early.opens = now.Add(time.Hour)
	if st := early.step(t); st.Phase != draw.Early || st.Nonce != nil {
		t.Fatalf("before the opening: %+v", st)
	}
	if _, err := draw.Read(ctx, y.c, y.k, y.drawn); !errors.Is(err, draw.ErrNone) {
		t.Fatalf("read before the commitment: %v; want ErrNone", err)
	}
	seeds := make([][]byte, 16)
	testenv.Race(len(seeds), func(i int) {
		var err error
		if seeds[i], err = toySecret.SeedOf("toy", draw.Lottery, y.step(t)); err != nil {
			t.Error(err)
		}
	})
	for i := range seeds {
		if !bytes.Equal(seeds[i], seeds[0]) || len(seeds[i]) != 32 {
			t.Fatalf("caller %d saw seed %x, caller 0 %x: one commitment", i, seeds[i], seeds[0])
		}
	}
	pub, err := draw.Read(ctx, y.c, y.k, y.drawn)
	if err != nil || pub.Seed != "" || pub.Drawn || !pub.DrawAt.Equal(y.drawn) {
		t.Fatalf("committed: %+v, %v; want a commitment, no seed, drawn at the plan's time", pub, err)
	}
	sum := sha256.Sum256(seeds[0])
	if pub.Commitment != hex.EncodeToString(sum[:]) {
		t.Fatalf("commitment %s is not SHA-256 of the seed", pub.Commitment)
	}
	var ids []any
	for i := 1; i <= 25; i++ {
		ids = append(ids, strconv.FormatInt(int64(i), 36)+".x"+strconv.Itoa(i))
	}
	rc.RPush(ctx, y.list, ids...)
	if st := y.step(t); st.Phase != draw.Open {
		t.Fatalf("before the freeze: %+v", st)
	}
	time.Sleep(time.Until(y.drawn))
	st := y.step(t)
	if st.Phase != draw.Due || st.Entries != 25 {
		t.Fatalf("after the freeze: %+v; want the draw due with 25 entries", st)
	}
	rc.RPush(ctx, y.list, "z.late") // never an entry
	if again := y.step(t); again.Entries != 25 {
		t.Fatalf("the entries grew after the freeze: %d", again.Entries)
	}

	var mu sync.Mutex
	var published []string
	apply := func(owner string) draw.Apply {
		return draw.Apply{
			Entries: func(ctx context.Context) ([]string, error) {
				v, err := rc.LRange(ctx, y.list, 0, st.Entries-1).Result()
				return v, err
			},
			With: func(ctx context.Context, p redis.Pipeliner, d *draw.Drawn) {
				p.Set(ctx, "wr:{toy}:private", d.Entries[0].ID, 0)
			},
			Fields:    func(d *draw.Drawn) []any { return []any{"by", owner} },
			Published: func(*draw.Drawn) { mu.Lock(); published = append(published, owner); mu.Unlock() },
			Rest: func(ctx context.Context, d *draw.Drawn) error {
				return rc.HSet(ctx, y.k.Hash, "done", 1).Err()
			},
		}
	}
	testenv.Race(4, func(i int) {
		owner := fmt.Sprint("drawer-", i)
		if _, err := draw.Run(ctx, y.c, y.k, owner, seeds[0], apply(owner)); err != nil {
			t.Errorf("%s: %v", owner, err)
		}
	})
	pub, err = draw.Read(ctx, y.c, y.k, time.Time{})
	if err != nil || !pub.Drawn || pub.Seed != hex.EncodeToString(seeds[0]) || pub.Nonce != hex.EncodeToString(st.Nonce) || pub.Entries != 25 {
		t.Fatalf("drawn: %+v, %v", pub, err)
	}
	by := rc.HGet(ctx, y.k.Hash, "by").Val()
	if len(published) == 0 || published[0] != by {
		t.Fatalf("published by %q, told %v", by, published)
	}
	if rc.Exists(ctx, y.k.Lease).Val() != 0 {
		t.Error("the lease is still held once the draw is done")
	}
	// What anyone recomputes from the published face and list alone.
	var list strings.Builder
	if err := draw.WriteEntries(ctx, y.c, y.k, &list); err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(list.String())
	var entries []string
	for _, id := range ids {
		entries = append(entries, id.(string))
	}
	if d := draw.Digest(entries); pub.EntriesDigest != hex.EncodeToString(d) {
		t.Fatalf("digest %s; want %x", pub.EntriesDigest, d)
	}
	key, err := draw.KeyHex(pub.Seed, pub.EntriesDigest)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range draw.Rank(key, entries) {
		if got[i] != e.ID {
			t.Fatalf("published list %v; want the rank order at %d: %s", got, i, e.ID)
		}
	}
	if rc.Get(ctx, "wr:{toy}:private").Val() != got[0] {
		t.Error("the kind's own write (With) is not the draw's")
	}

	// A process that died mid-draw left the lease: nobody else draws until
	// it lapses, then the next writes the same.
	rc.Set(ctx, y.k.Lease, "dead", 300*time.Millisecond)
	if d, err := draw.Run(ctx, y.c, y.k, "next", seeds[0], apply("next")); d != nil || err != nil {
		t.Fatalf("a draw under another's lease: %v, %v", d, err)
	}
	time.Sleep(350 * time.Millisecond)
	if _, err := draw.Run(ctx, y.c, y.k, "next", seeds[0], apply("next")); err != nil {
		t.Fatal(err)
	}
	var again strings.Builder
	if err := draw.WriteEntries(ctx, y.c, y.k, &again); err != nil || again.String() != list.String() {
		t.Fatalf("a second draw wrote another list (%v)", err)
	}
	if rc.HGet(ctx, y.k.Hash, "by").Val() != by {
		t.Error("a second draw published again")
	}
}

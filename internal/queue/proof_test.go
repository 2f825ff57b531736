package queue_test

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

func proofOf(id string, exp time.Time) line.Proof { return line.Proof{ID: id, ExpiresAt: exp} }

// spentKey is the spent-proofs set a proof expiring at exp lands in.
func spentKey(exp time.Time) string {
	return rdb.ProofsKey(event, exp.UnixMilli()/60_000)
}

// One proof, presented by 64 joins released together: exactly one gets a
// place, every other is told it was spent, and Redis agrees (one ticket
// issued, one in line, one id in the spent set, which goes a second after
// its minute).
func TestJoinProvedSpendsAProofOnce(t *testing.T) {
	onEachLayout(t, func(t *testing.T, e env) {
		ctx := context.Background()
		exp := time.Now().Add(90 * time.Second)
		p := proofOf("AAAAAAAAAAAAAAAAAAAAAA", exp)
		const n = 64
		var (
			mu    sync.Mutex
			won   []line.JoinResult
			other []error
		)
		testenv.Race(n, func(int) {
			r, err := e.store.JoinProved(ctx, event, e.open(), p)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won = append(won, r)
			} else if !errors.Is(err, line.ErrProofSpent) {
				other = append(other, err)
			}
		})
		if len(won) != 1 || len(other) != 0 {
			t.Fatalf("%d joins got a place for one proof, other errors %v; want exactly 1 and none", len(won), other)
		}
		st := checkBooks(t, e)
		if st.Joined != 1 {
			t.Errorf("joined %d; want 1", st.Joined)
		}
		members, err := e.rdb.SMembers(ctx, spentKey(exp)).Result()
		if err != nil || len(members) != 1 || members[0] != p.ID {
			t.Errorf("spent set %s = %q, %v; want just the proof's id", spentKey(exp), members, err)
		}
		minute := exp.UnixMilli() / 60_000
		if at, err := e.rdb.PExpireTime(ctx, spentKey(exp)).Result(); err != nil || at != time.Duration((minute+1)*60_000+1000)*time.Millisecond {
			t.Errorf("spent set expires at %v, %v; want a second after its minute, %d ms", at, err, (minute+1)*60_000+1000)
		}
	})
}

// Proofs expiring in the same minute share one set; another minute is
// another set; a second proof is another place.
func TestJoinProvedKeysByExpiryMinute(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	base := time.Now().Add(time.Minute).Truncate(time.Minute).Add(10 * time.Second)
	for i, p := range []line.Proof{
		proofOf("a", base), proofOf("b", base.Add(20*time.Second)), proofOf("c", base.Add(time.Minute)),
	} {
		if _, err := e.store.JoinProved(ctx, event, open(), p); err != nil {
			t.Fatalf("proof %d: %v", i, err)
		}
	}
	if n := e.rdb.SCard(ctx, spentKey(base)).Val(); n != 2 {
		t.Errorf("the first minute's set holds %d; want 2", n)
	}
	if n := e.rdb.SCard(ctx, spentKey(base.Add(time.Minute))).Val(); n != 1 {
		t.Errorf("the next minute's set holds %d; want 1", n)
	}
	if st := checkBooks(t, e); st.Joined != 3 {
		t.Errorf("joined %d; want 3", st.Joined)
	}
}

// A proof expired by Redis TIME buys nothing and leaves nothing behind,
// whatever the caller's clock said.
func TestJoinProvedRefusesAnExpiredProof(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	exp := time.Now().Add(-time.Second)
	if _, err := e.store.JoinProved(ctx, event, open(), proofOf("late", exp)); !errors.Is(err, line.ErrProofExpired) {
		t.Fatalf("JoinProved with an expired proof = %v; want ErrProofExpired", err)
	}
	if n := e.rdb.Exists(ctx, spentKey(exp)).Val(); n != 0 {
		t.Error("an expired proof made a spent set")
	}
	if st := checkBooks(t, e); st.Joined != 0 {
		t.Errorf("joined %d; want 0", st.Joined)
	}
}

// A join refused for the sale's sake (closed, not open yet) does not spend
// the proof: the fan may use it once the sale lets them.
func TestJoinProvedKeepsTheProofOfARefusedJoin(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	p := proofOf("keep", time.Now().Add(time.Minute))
	closed := open()
	closed.Mode = "closed"
	later := open()
	later.OpensAt = at(time.Hour)
	for _, c := range []struct {
		set  line.Settings
		want error
	}{{closed, line.ErrClosed}, {later, line.ErrNotOpen}} {
		if _, err := e.store.JoinProved(ctx, event, c.set, p); !errors.Is(err, c.want) {
			t.Fatalf("JoinProved = %v; want %v", err, c.want)
		}
	}
	if _, err := e.store.JoinProved(ctx, event, open(), p); err != nil {
		t.Fatalf("JoinProved once open: %v; want a place", err)
	}
	if _, err := e.store.JoinProved(ctx, event, open(), p); !errors.Is(err, line.ErrProofSpent) {
		t.Fatalf("JoinProved again: %v; want ErrProofSpent", err)
	}
}

// UndoJoin gives a join back to the address's budget of the minute, never
// below zero and never making a key.
func TestUndoJoin(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	addr := netip.MustParseAddr("192.0.2.7")
	now := time.Now().Truncate(time.Minute).Add(10 * time.Second)
	for i := range 3 {
		if wait, err := e.store.AllowJoin(ctx, addr, 3, now); err != nil || wait != 0 {
			t.Fatalf("join %d: wait %v, %v", i, wait, err)
		}
	}
	if wait, _ := e.store.AllowJoin(ctx, addr, 3, now); wait == 0 {
		t.Fatal("a fourth join within the limit of 3")
	}
	for range 2 { // the refused one counted too: two undos make room for one
		if err := e.store.UndoJoin(ctx, addr, now); err != nil {
			t.Fatal(err)
		}
	}
	if wait, err := e.store.AllowJoin(ctx, addr, 3, now); err != nil || wait != 0 {
		t.Fatalf("after giving two back: wait %v, %v; want room for one", wait, err)
	}
	other := netip.MustParseAddr("192.0.2.8")
	if err := e.store.UndoJoin(ctx, other, now); err != nil {
		t.Fatal(err)
	}
	if n := e.rdb.Exists(ctx, "wr:joinlimit:{192.0.2.8}:"+strconv.FormatInt(now.Unix()/60, 10)).Val(); n != 0 {
		t.Error("UndoJoin made a key for an address that had none")
	}
}

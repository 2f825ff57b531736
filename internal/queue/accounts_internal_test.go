package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// An account whose first join's second step reaches its shard more than
// the grace after its first step (a failover, a slow WAIT) must not end
// with two places: the account's next join takes the first place for dead
// after the grace and makes another, so the late step makes nothing.
// The two steps are run by hand here, with the delay between them.
func TestLateShardStepMakesNoSecondPlace(t *testing.T) {
	ctx := context.Background()
	_, rc := testenv.Redis(t)
	s := NewStore(rc, []byte("a ticket secret of thirty-two bytes!"))
	set := line.Settings{Mode: "queue", AdmitPerSecond: 5, MaxActive: 10, AccessTTL: time.Minute, AbandonAfter: time.Minute, Shards: 3}
	const event, account = "late", "acct-1"

	first, err := s.joinBegin(ctx, event, set, line.JoinOptions{Account: account}, "")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(accountGrace + 100*time.Millisecond)
	second, err := s.JoinWith(ctx, event, set, line.JoinOptions{Account: account})
	if err != nil {
		t.Fatal(err)
	}
	if second.Resumed || second.ID == first.t.ID() {
		t.Fatalf("the second join resumed %s; want a new place (the first is on no shard)", second.ID)
	}
	_, err = s.joinEnd(ctx, event, set, first)
	if !errors.Is(err, line.ErrUnavailable) {
		t.Errorf("the late second step: %v; want ErrUnavailable, no place", err)
	}
	var places []string
	for _, sk := range rdb.ShardKeysFor(event, 3) {
		places = append(places, rc.ZRange(ctx, sk.Wait, 0, -1).Val()...)
	}
	if len(places) != 1 || places[0] != second.ID {
		t.Errorf("the account's places in line: %v; want only %s", places, second.ID)
	}
	st, err := s.Stats(ctx, event)
	if err != nil {
		t.Fatal(err)
	}
	if st.Joined != 1 {
		t.Errorf("joined %d; want 1 (the late step counts nothing)", st.Joined)
	}
}

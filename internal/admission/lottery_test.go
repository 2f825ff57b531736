package admission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
)

func lotteryEventYAML(id string, prequeue, opens time.Time) string {
	return fmt.Sprintf("  - id: %q\n    prequeue_opens_at: %q\n    opens_at: %q\n    admission: {admit_per_second: 100, max_active: 50}\n",
		id, prequeue.UTC().Format(time.RFC3339Nano), opens.UTC().Format(time.RFC3339Nano))
}

// Once drawn, always drawn: a reload that postpones opens_at (and the
// pre-queue) after the draw changes nothing of the line. The admitter keeps
// publishing the frozen times, tells the audit the change was ignored, and
// a join is FIFO behind the entries, never a new lottery place.
func TestOnceDrawnAlwaysDrawn(t *testing.T) {
	ctx := context.Background()
	opens := time.Now().Add(1500 * time.Millisecond)
	pre := time.Now().Add(-time.Minute)
	e := setup(t, yamlConfig(lotteryEventYAML("premiere", pre, opens)))
	e.oneTickLater(t)
	set := e.published(t, "premiere")
	var fans []line.JoinResult
	for range 5 {
		r, err := e.store.Join(ctx, "premiere", set)
		if err != nil {
			t.Fatal(err)
		}
		fans = append(fans, r)
	}
	waitFor(t, "the draw", func() bool {
		l, err := e.store.Lottery(ctx, "premiere", set)
		return err == nil && l.Drawn
	})

	later := time.Now().Add(time.Hour)
	e.replace(t, yamlConfig(lotteryEventYAML("premiere", later.Add(-time.Minute), later)))
	waitFor(t, "the reload", func() bool { return e.adm.Config().Events[0].OpensAt.Equal(later.Truncate(0)) })
	e.oneTickLater(t)
	got := e.published(t, "premiere")
	if got.OpensAt == nil || got.OpensAt.UnixMilli() != opens.UnixMilli() || got.PrequeueOpensAt == nil || got.PrequeueOpensAt.UnixMilli() != pre.UnixMilli() {
		t.Fatalf("published opens_at %v prequeue %v after the reload; want the frozen %v and %v", got.OpensAt, got.PrequeueOpensAt, opens, pre)
	}
	r, err := e.store.Join(ctx, "premiere", got)
	if err != nil {
		t.Fatalf("a join after the reload: %v; want a place", err)
	}
	if _, err := e.store.TicketDraw(ctx, "premiere", r.Ticket); err != line.ErrNotInLottery {
		t.Errorf("the join's draw: %v; want ErrNotInLottery (FIFO after the draw)", err)
	}
	entries, err := e.ops.AuditLog(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	ignored := 0
	for _, a := range entries {
		if a.Event == "premiere" && strings.Contains(a.Change, "ignored") {
			ignored++
		}
	}
	if ignored != 1 {
		t.Errorf("%d audit entries say the change was ignored; want 1: %+v", ignored, entries)
	}
}

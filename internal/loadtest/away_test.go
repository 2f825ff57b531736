package loadtest

import (
	"container/heap"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// BenchmarkAwayPollLoad measures the poll load that fans away from the
// page save: a line of 2,000 fans (rate 5/s, held still: paused), each
// polling its status exactly as told (pollAfter from the real scripts, on
// a real Redis), for 20 s, with none, half and nine in ten of them away
// (they poll nothing, and keep their places). docs/QUEUE.md, "Away from
// the page", quotes its output.
func BenchmarkAwayPollLoad(b *testing.B) {
	const (
		fans   = 2000
		window = 20 * time.Second
	)
	for range b.N {
		for _, share := range []float64{0, 0.5, 0.9} {
			polls, kept := awayPollLoad(b, fans, share, window)
			b.ReportMetric(polls, fmt.Sprintf("polls/s@%.0f%%away", share*100))
			b.Logf("%d fans, %.0f%% away: %.0f polls/s over %v; away places kept: %d of %d",
				fans, share*100, polls, window, kept, int(share*fans))
		}
	}
}

// awayPollLoad is one run: it returns the polls per second and how many
// away places are still in line at the end.
func awayPollLoad(tb testing.TB, fans int, share float64, window time.Duration) (float64, int) {
	ctx := context.Background()
	_, rc := testenv.Redis(tb)
	store := queue.NewStore(rc, []byte("away-load-ticket-secret-0123456789"))
	set := line.Settings{Mode: line.ModePaused, AdmitPerSecond: 5, MaxActive: 100, AccessTTL: 10 * time.Minute, AbandonAfter: 60 * time.Second}
	const event = "away-load"
	next := &pollHeap{}
	var away []line.Ticket
	for i := range fans {
		r, err := store.JoinWith(ctx, event, set, line.JoinOptions{Account: fmt.Sprintf("fan-%d", i)})
		if err != nil {
			tb.Fatal(err)
		}
		if float64(i%10) < share*10 { // away: that share of every ten places, all along the line
			err := store.StepAway(ctx, line.AwayRequest{Event: event, Settings: set, Ticket: r.Ticket,
				Account: fmt.Sprintf("fan-%d", i), Email: fmt.Sprintf("fan-%d@example.test", i), Lang: "en", Now: time.Now()})
			if err != nil {
				tb.Fatal(err)
			}
			away = append(away, r.Ticket)
			continue
		}
		heap.Push(next, poll{ticket: r.Ticket, at: time.Now().Add(r.PollAfter)})
	}
	start := time.Now()
	end := start.Add(window)
	polls := 0
	for next.Len() > 0 {
		p := heap.Pop(next).(poll)
		if p.at.After(end) {
			break
		}
		time.Sleep(time.Until(p.at))
		st, err := store.Status(ctx, event, p.ticket, set)
		if err != nil {
			tb.Fatal(err)
		}
		polls++
		heap.Push(next, poll{ticket: p.ticket, at: time.Now().Add(st.PollAfter)})
	}
	kept := 0
	for _, t := range away {
		if st, err := store.Status(ctx, event, t, set); err == nil && st.State == line.Waiting {
			kept++
		}
	}
	return float64(polls) / window.Seconds(), kept
}

type poll struct {
	ticket line.Ticket
	at     time.Time
}

type pollHeap []poll

func (h pollHeap) Len() int           { return len(h) }
func (h pollHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h pollHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pollHeap) Push(x any)        { *h = append(*h, x.(poll)) }
func (h *pollHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

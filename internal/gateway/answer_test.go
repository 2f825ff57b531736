package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

func TestAppendWaitingIsEncodingJSON(t *testing.T) {
	for _, w := range []waitingJSON{
		{Status: "waiting", Position: 1, Ahead: 0, PollAfterMs: 2000},
		{Ticket: "AbC-_.123", Status: "waiting", Position: 4242, Ahead: 4241, ETASeconds: new(int64(61)), PollAfterMs: 10604, Available: new(int64(0))},
		{Ticket: "x", Status: "waiting", Position: -1, Ahead: -9223372036854775808, ETASeconds: new(int64(0)), PollAfterMs: 0, Available: new(int64(9223372036854775807))},
		{Ticket: `odd "quoted" <b>&\ é` + "\n", Status: "waiting"},
	} {
		want, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendWaiting(nil, w); string(got) != string(want) {
			t.Errorf("appendWaiting(%+v)\n got %s\nwant %s", w, got, want)
		}
	}
}

// The waiting answer, a join's cookie, a poll's shared budget and its key
// names cost no allocation.
func TestHotPathAllocations(t *testing.T) {
	eta, avail := int64(30), int64(12)
	w := waitingJSON{Status: "waiting", Position: 4242, Ahead: 4241, ETASeconds: &eta, PollAfterMs: 10604, Available: &avail}
	buf := make([]byte, 0, 256)
	if a := testing.AllocsPerRun(1000, func() { buf = appendWaiting(buf[:0], w) }); a != 0 {
		t.Errorf("appendWaiting: %v allocations; want 0", a)
	}
	app := fiber.New()
	c := app.AcquireCtx(&fasthttp.RequestCtx{})
	defer app.ReleaseCtx(c)
	until := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	if a := testing.AllocsPerRun(1000, func() {
		c.Response().Header.Reset()
		putCookie(c, "wr_t_premiere", "AbC-_.123", until, true)
	}); a != 0 {
		t.Errorf("a ticket's cookie: %v allocations; want 0", a)
	}
	budgets.current()
	if a := testing.AllocsPerRun(1000, func() { _ = budgets.current() }); a > 0.01 {
		// One budget per 100 ms: a new one now and then.
		t.Errorf("a poll's budget: %v allocations; want none but a new budget each 100 ms", a)
	}
}

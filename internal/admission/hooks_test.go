package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/admission"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
	"github.com/waitroom/waitroom/internal/webhook"
	"github.com/waitroom/waitroom/internal/webhook/webhooktest"
)

// hooksYAML is a config of events with one webhook, to url.
func hooksYAML(url, events string) string {
	return yamlConfig(events) + fmt.Sprintf("webhooks:\n  - {url: %q, secret: \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"}\n", url)
}

// sent lists the types r took for event, in order.
func sent(r *webhooktest.Receiver, event string) []string {
	var out []string
	for _, d := range r.Delivered("") {
		if d.Payload.Event == event {
			out = append(out, d.Payload.Type)
		}
	}
	return out
}

// data is d's data, read as JSON.
func data(t *testing.T, d webhooktest.Delivery) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(d.Payload.Data, &m); err != nil {
		t.Fatalf("%s's data %s: %v", d.Payload.Type, d.Payload.Data, err)
	}
	return m
}

// hooked is a test's admitters with webhooks to a receiver, and a sender.
type hooked struct {
	*env
	hooks  *webhook.Store
	recv   *webhooktest.Receiver
	sender *webhook.Sender
}

func setupHooks(t *testing.T, events string) *hooked {
	t.Helper()
	recv := webhooktest.New(t, nil)
	var hooks *webhook.Store
	e := setupOn(t, backends[0], hooksYAML(recv.URL, events), func(e *env, o *admission.Options) {
		hooks = webhook.NewStore(rdb.New(e.rdb))
		o.Webhooks = hooks
	})
	h := &hooked{env: e, hooks: hooks, recv: recv}
	h.sender = webhook.NewSender(hooks, webhook.SenderOptions{
		Endpoints: func() []webhook.Endpoint { return policy.Endpoints(e.adm.Config()) },
		Events:    func() []string { return []string{"premiere", "matinee"} }})
	return h
}

// types lists the moments made for event (the delivery log), oldest
// first.
func (h *hooked) types(t *testing.T, event string) []string {
	t.Helper()
	d, err := h.hooks.Deliveries(context.Background(), []string{event}, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(d) - 1; i >= 0; i-- {
		out = append(out, d[i].Type)
	}
	return out
}

// waitTypes waits until event's moments are want.
func (h *hooked) waitTypes(t *testing.T, event string, want ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s's moments %v", event, want), func() bool { return slices.Equal(h.types(t, event), want) })
}

// Exactly one sale.soldout while two admitters race: two real admitters
// tick one Redis, the inventory turns sold out, and more ticks of both are
// released together; one moment is made, and the receiver gets it once.
func TestOneSoldOutWhileTwoAdmittersRace(t *testing.T) {
	h := setupHooks(t, eventYAML("premiere", "50"))
	other := h.admitter(t, h.adm.Config(), slog.New(slog.DiscardHandler), func(_ *env, o *admission.Options) { o.Webhooks = h.hooks })
	ctx := context.Background()
	h.waitTypes(t, "premiere", webhook.SaleOpened)
	if err := h.store.SyncInventory(ctx, "premiere", 0, line.Snapshot{Free: 3}); err != nil {
		t.Fatal(err)
	}
	h.oneTickLater(t)
	if err := h.store.SyncInventory(ctx, "premiere", 0, line.Snapshot{Free: 0}); err != nil {
		t.Fatal(err)
	}
	adms := []*admission.Admitter{h.adm, other}
	testenv.Race(16, func(i int) { adms[i%2].TickAll(ctx) })
	h.oneTickLater(t)
	if got := h.types(t, "premiere"); !slices.Equal(got, []string{webhook.SaleOpened, webhook.SaleSoldOut}) {
		t.Fatalf("moments %v; want one sale.opened, one sale.soldout", got)
	}
	waitFor(t, "the deliveries", func() bool { h.sender.Round(ctx); return len(sent(h.recv, "premiere")) == 2 })
	byID := map[string]int{}
	for _, d := range h.recv.Delivered("") {
		byID[d.Headers["webhook-id"]]++
	}
	for id, n := range byID {
		if n != 1 {
			t.Errorf("delivery %s received %d times; want once", id, n)
		}
	}
}

// The sale's moments as they happen: nothing before opens_at, sale.opened
// at it; an operator's pause and its end (sale.paused, sale.resumed); a
// reload that closes it (settings.changed by config, with what changed,
// then sale.closed); each once, whatever the ticks in between.
func TestTheSalesMoments(t *testing.T) {
	ctx := context.Background()
	opens := time.Now().Add(time.Second).UTC()
	ev := func(mode string) string {
		return fmt.Sprintf("  - id: \"premiere\"\n    mode: %q\n    opens_at: %q\n    admission: {admit_per_second: 50, max_active: 5}\n", mode, opens.Format(time.RFC3339Nano))
	}
	h := setupHooks(t, ev("queue"))
	h.oneTickLater(t)
	if got := h.types(t, "premiere"); len(got) != 0 {
		t.Fatalf("before opens_at: %v; want no moment", got)
	}
	h.waitTypes(t, "premiere", webhook.SaleOpened)

	pause := map[string]operators.Override{operators.FieldMode: {Value: "paused", Base: "queue", At: time.Now()}}
	if err := h.ops.SetOverrides(ctx, "premiere", pause, nil); err != nil {
		t.Fatal(err)
	}
	h.waitTypes(t, "premiere", webhook.SaleOpened, webhook.SalePaused)
	if err := h.ops.SetOverrides(ctx, "premiere", nil, []string{operators.FieldMode}); err != nil {
		t.Fatal(err)
	}
	h.waitTypes(t, "premiere", webhook.SaleOpened, webhook.SalePaused, webhook.SaleResumed)

	h.replace(t, hooksYAML(h.recv.URL, ev("closed")))
	h.waitTypes(t, "premiere", webhook.SaleOpened, webhook.SalePaused, webhook.SaleResumed, webhook.SettingsChanged, webhook.SaleClosed)
	h.oneTickLater(t)
	if got := h.types(t, "premiere"); len(got) != 5 {
		t.Fatalf("moments after more ticks: %v; want the five, once each", got)
	}
	waitFor(t, "the deliveries", func() bool { h.sender.Round(ctx); return len(sent(h.recv, "premiere")) == 5 })
	var changed map[string]any
	for _, d := range h.recv.Delivered("") {
		if d.Payload.Type == webhook.SettingsChanged {
			changed = data(t, d)
		}
	}
	mode, _ := changed["changes"].(map[string]any)["mode"].(map[string]any)
	if changed["by"] != config.ByConfig || mode["from"] != "queue" || mode["to"] != "closed" || len(changed["changes"].(map[string]any)) != 1 {
		t.Errorf("settings.changed data = %v; want mode queue -> closed alone, by config", changed)
	}
}

// The adaptive admitter's view: booking.degraded when it slows the
// event down, booking.recovered when it is back at the full rate.
func TestBookingDegradedAndRecovered(t *testing.T) {
	ctx := context.Background()
	h := setupHooks(t, "  - id: \"premiere\"\n    admission: {admit_per_second: 50, max_active: 5, adaptive: true}\n")
	h.waitTypes(t, "premiere", webhook.SaleOpened)
	if _, _, err := h.ops.Adapt(ctx, "premiere", 1, 0, 0.5, 0.05); err != nil {
		t.Fatal(err)
	}
	h.waitTypes(t, "premiere", webhook.SaleOpened, webhook.BookingDegraded)
	for i := 0; i < 2; i++ {
		if _, _, err := h.ops.Adapt(ctx, "premiere", 0, 0, 0.5, 0.05); err != nil {
			t.Fatal(err)
		}
	}
	h.waitTypes(t, "premiere", webhook.SaleOpened, webhook.BookingDegraded, webhook.BookingRecovered)
}

// A lottery drawn at opens_at is announced once: lottery.drawn, with the
// draw's commitment and seed.
func TestLotteryDrawnAnnounced(t *testing.T) {
	opens := time.Now().Add(1500 * time.Millisecond)
	h := setupHooks(t, lotteryEventYAML("premiere", time.Now().Add(-time.Minute), opens))
	h.waitTypes(t, "premiere", webhook.SaleOpened, webhook.LotteryDrawn)
	h.oneTickLater(t)
	if got := h.types(t, "premiere"); len(got) != 2 {
		t.Fatalf("moments %v; want sale.opened and lottery.drawn once", got)
	}
	ctx := context.Background()
	waitFor(t, "the deliveries", func() bool { h.sender.Round(ctx); return len(sent(h.recv, "premiere")) == 2 })
	for _, m := range h.recv.Delivered("") {
		if m.Payload.Type == webhook.LotteryDrawn {
			d := data(t, m)
			if d["commitment"] == "" || d["seed"] == "" || d["entriesPath"] != "/api/v1/events/premiere/lottery/entries" {
				t.Errorf("lottery.drawn data = %v; want the commitment, the seed, where the entries are", d)
			}
		}
	}
}

// An auto event's line, seen by two real admitters ticking one Redis:
// line.formed once when a fan waits at the cap, line.cleared once when the
// admitters have let the line in, whatever the ticks of both in between.
func TestLineFormedAndClearedWhileTwoAdmittersRace(t *testing.T) {
	h := setupHooks(t, "  - id: \"premiere\"\n    mode: auto\n    admission: {admit_per_second: 50, max_active: 2}\n")
	h.admitter(t, h.adm.Config(), slog.New(slog.DiscardHandler), func(_ *env, o *admission.Options) { o.Webhooks = h.hooks })
	ctx := context.Background()
	h.waitTypes(t, "premiere", webhook.SaleOpened)
	set := h.published(t, "premiere")
	var in []line.JoinResult
	for _, want := range []line.State{line.Admitted, line.Admitted, line.Waiting} {
		r, err := h.store.Join(ctx, "premiere", set)
		if err != nil || r.State != want {
			t.Fatalf("join: %s, %v; want %s", r.State, err, want)
		}
		in = append(in, r)
	}
	h.waitTypes(t, "premiere", webhook.SaleOpened, webhook.LineFormed)
	if err := h.store.Leave(ctx, "premiere", in[0].Ticket); err != nil {
		t.Fatal(err)
	}
	h.waitTypes(t, "premiere", webhook.SaleOpened, webhook.LineFormed, webhook.LineCleared)
	h.oneTickLater(t)
	if got := h.types(t, "premiere"); len(got) != 3 {
		t.Fatalf("moments after more ticks: %v; want the three, once each", got)
	}
	waitFor(t, "the deliveries", func() bool { h.sender.Round(ctx); return len(sent(h.recv, "premiere")) == 3 })
}

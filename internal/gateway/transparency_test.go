package gateway_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
)

// The transparency routes refuse what they must, and change nothing.
func TestTransparencyRoutesRefuseBadInput(t *testing.T) {
	e := setup(t, 0)
	for _, c := range []struct {
		path string
		code int
		err  string
	}{
		{"/api/v1/events/nope/lottery", http.StatusNotFound, "unknown_event"},
		{"/api/v1/events/nope/report", http.StatusNotFound, "unknown_event"},
		{"/api/v1/events/premiere/lottery", http.StatusNotFound, "no_lottery"},
		{"/api/v1/events/premiere/lottery/not-a-ticket", http.StatusBadRequest, "invalid_ticket"},
	} {
		r := e.do(http.MethodGet, c.path, nil)
		if r.code != c.code || r.body["error"] != c.err {
			t.Errorf("GET %s: %d %s; want %d %s", c.path, r.code, r.raw, c.code, c.err)
		}
	}
	// A real ticket of a sale with no pre-queue has no draw.
	tk := e.join("premiere").body["ticket"].(string)
	if r := e.do(http.MethodGet, "/api/v1/events/premiere/lottery/"+tk, nil); r.code != http.StatusNotFound || r.body["error"] != "no_lottery" {
		t.Errorf("a ticket's draw with no lottery: %d %s; want 404 no_lottery", r.code, r.raw)
	}
	if l := queuetest.Of(t, e.rdb, "premiere"); l.Has(l.Keys().Lottery) {
		t.Errorf("the refusals wrote a lottery")
	}
}

// A sale with a pre-queue through the gateway: the commitment is there
// before the first place, the seed is not; from opening the seed hashes
// to the commitment and every fan's draw and rank can be recomputed; the
// report and its page show the sale, in the fan's language, and the
// waiting room links to it.
func TestLotteryAndReportThroughTheGateway(t *testing.T) {
	e := setup(t, 0)
	ctx := context.Background()
	ev, _ := e.cfg.Event("premiere")
	set := queue.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
	pre, opens := time.Now().Add(-time.Minute), time.Now().Add(1500*time.Millisecond)
	set.PrequeueOpensAt, set.OpensAt = &pre, &opens
	if err := e.line.PublishSettings(ctx, ev.ID, set); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); ; {
		if r := e.do(http.MethodGet, "/api/v1/events/premiere", nil); r.body["state"] == "prequeue" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway never read the pre-queue settings")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var tickets []string
	for range 5 {
		r := e.join("premiere")
		if r.code != http.StatusCreated {
			t.Fatalf("pre-queue join: %d %s", r.code, r.raw)
		}
		tickets = append(tickets, r.body["ticket"].(string))
	}
	l := e.do(http.MethodGet, "/api/v1/events/premiere/lottery", nil)
	if l.code != http.StatusOK || len(l.body["commitment"].(string)) != 64 || l.body["committedAt"] == nil || l.body["drawAt"] == nil {
		t.Fatalf("lottery before opening: %d %s; want 200 with commitment, committedAt, drawAt", l.code, l.raw)
	}
	if _, ok := l.body["seed"]; ok {
		t.Fatalf("the seed is out before opening: %s", l.raw)
	}
	if r := e.do(http.MethodGet, "/api/v1/events/premiere/lottery/"+tickets[0], nil); r.code != http.StatusConflict || r.body["error"] != "not_drawn" {
		t.Errorf("a draw before opening: %d %s; want 409 not_drawn", r.code, r.raw)
	}
	time.Sleep(time.Until(opens))
	// Opened, not drawn yet (no admitter has ticked): nothing shown, and
	// the fan is told the draw is under way, not that it comes at opening.
	if r := e.do(http.MethodGet, "/api/v1/events/premiere/lottery", nil); r.code != http.StatusOK || r.body["seed"] != nil || r.body["entriesDigest"] != nil {
		t.Errorf("lottery opened, not drawn: %d %s; want no seed, no digest", r.code, r.raw)
	}
	if r := e.do(http.MethodGet, "/api/v1/events/premiere/lottery/"+tickets[0], nil); r.code != http.StatusConflict || r.body["error"] != "not_drawn" ||
		!strings.Contains(r.body["message"].(string), "being drawn") || r.hdr.Get("Retry-After") == "" {
		t.Errorf("a draw being drawn: %d %s; want 409 not_drawn, being drawn, Retry-After", r.code, r.raw)
	}
	if r := e.do(http.MethodGet, "/api/v1/events/premiere/lottery/entries", nil); r.code != http.StatusConflict || r.body["error"] != "not_drawn" {
		t.Errorf("the entries before the draw: %d %s; want 409 not_drawn", r.code, r.raw)
	}
	if _, err := e.line.Tick(ctx, ev.ID, set); err != nil {
		t.Fatal(err)
	}
	l2 := e.do(http.MethodGet, "/api/v1/events/premiere/lottery", nil)
	seed, err := hex.DecodeString(l2.body["seed"].(string))
	if err != nil {
		t.Fatalf("lottery after opening: %s", l2.raw)
	}
	sum := sha256.Sum256(seed)
	if hex.EncodeToString(sum[:]) != l.body["commitment"] || l2.body["commitment"] != l.body["commitment"] || l2.body["entries"] != 5.0 {
		t.Fatalf("after opening %s; before %s: the seed must hash to the one commitment, 5 entries", l2.raw, l.raw)
	}
	// Anyone recomputes the draw from the published list: its digest, the
	// key, every draw and rank.
	list := e.do(http.MethodGet, "/api/v1/events/premiere/lottery/entries", nil)
	ids := strings.Fields(string(list.raw))
	if list.code != http.StatusOK || !strings.HasPrefix(list.hdr.Get("Content-Type"), "text/plain") || len(ids) != 5 {
		t.Fatalf("the entries: %d %q %s; want 200 text/plain, 5 lines", list.code, list.hdr.Get("Content-Type"), list.raw)
	}
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	dh := sha256.New()
	for _, id := range sorted {
		dh.Write([]byte(id + "\n"))
	}
	digest := dh.Sum(nil)
	if l2.body["entriesDigest"] != hex.EncodeToString(digest) {
		t.Fatalf("entriesDigest %v; the published list's is %x", l2.body["entriesDigest"], digest)
	}
	key := sha256.Sum256(append(seed, digest...))

	for _, tk := range tickets {
		r := e.do(http.MethodGet, "/api/v1/events/premiere/lottery/"+tk, nil)
		id, _ := r.body["ticketId"].(string)
		m := hmac.New(sha256.New, key[:])
		m.Write([]byte(id))
		if r.code != http.StatusOK || id == "" || r.body["draw"] != hex.EncodeToString(m.Sum(nil)) {
			t.Errorf("draw of %s: %d %s; want HMAC-SHA256(SHA-256(seed ‖ digest), ticket id)", tk, r.code, r.raw)
		}
		rank, _ := r.body["rank"].(float64)
		if rank < 1 || rank > 5 || ids[int(rank)-1] != id {
			t.Errorf("rank %v of %s: want its line in the published list %v", r.body["rank"], id, ids)
		}
	}

	// Let them in (the bucket fills from the opening), each fan's page
	// claiming its place.
	for deadline := time.Now().Add(5 * time.Second); ; {
		r, err := e.line.Tick(ctx, ev.ID, set)
		if err != nil {
			t.Fatal(err)
		}
		if r.Active == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fans were never let in")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, tk := range tickets {
		if r := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+tk, nil); r.body["status"] != "admitted" {
			t.Fatalf("status after admission: %s", r.raw)
		}
	}
	rep := e.do(http.MethodGet, "/api/v1/events/premiere/report", nil)
	if rep.code != http.StatusOK {
		t.Fatalf("report: %d %s", rep.code, rep.raw)
	}
	for _, f := range []string{"joined", "admitted", "left", "abandoned", "admittedPerSecond", "fifoInversions", "waitSeconds", "etaErrorSeconds", "soldOutAt"} {
		if _, ok := rep.body[f]; !ok {
			t.Errorf("report lacks %q: %s", f, rep.raw)
		}
	}
	if w := rep.body["waitSeconds"].(map[string]any); w["count"] != 5.0 || w["p50"] == nil {
		t.Errorf("waitSeconds %v; want 5 waits measured", w)
	}
	if rep.body["joined"] != 5.0 || rep.body["admitted"] != 5.0 || rep.body["fifoInversions"] != 0.0 {
		t.Errorf("report %s; want 5 joined, 5 admitted, no inversion", rep.raw)
	}
	rate := rep.body["admittedPerSecond"].(map[string]any)
	if _, ok := rate["perMinute"].([]any); !ok || rate["mean"] == nil {
		t.Errorf("admittedPerSecond %v; want mean and perMinute", rate)
	}

	for lang, word := range map[string]string{"en": "The lottery", "ja": "抽選", "ko": "추첨"} {
		page := e.do(http.MethodGet, "/e/premiere/report", nil, "Accept-Language", lang, "Cookie", "wr_t_premiere="+tickets[0])
		body := string(page.raw)
		if page.code != http.StatusOK || !strings.Contains(body, `<html lang="`+lang+`"`) || !strings.Contains(body, word) {
			t.Errorf("report page in %s: %d; want 200 in that language", lang, page.code)
		}
		for _, want := range []string{`<svg id="chart-rate"`, `id="lottery-seed"`, `id="lottery-rank"`, l.body["commitment"].(string)} {
			if !strings.Contains(body, want) {
				t.Errorf("report page in %s lacks %s", lang, want)
			}
		}
		if strings.Contains(body, "⟦") {
			t.Errorf("report page in %s has a missing word: %s", lang, body)
		}
	}
	room := e.do(http.MethodGet, "/e/premiere", nil)
	if !strings.Contains(string(room.raw), `href="/e/premiere/report"`) {
		t.Errorf("the waiting room does not link to the report")
	}
}

// A sale where nobody waited (each fan let in at the first tick after it
// came) has no pace to report: the report says so, with the configured
// rate its chart's line shows, and not "0 per second (configured: 0)".
func TestReportWhenNobodyWaited(t *testing.T) {
	e := setup(t, 0)
	ctx := context.Background()
	set := queue.Settings{Mode: "queue", AdmitPerSecond: 5, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
	tick := func() queue.TickResult {
		t.Helper()
		r, err := e.line.Tick(ctx, "premiere", set)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tick()                             // the bucket starts filling
	time.Sleep(400 * time.Millisecond) // two fans' worth at 5/s
	if r := e.join("premiere"); r.code != http.StatusCreated {
		t.Fatalf("join: %d %s", r.code, r.raw)
	}
	if r := tick(); r.Active != 1 || r.Waiting != 0 {
		t.Fatalf("tick: %+v; want the fan let in at once", r)
	}
	tick()
	rep := e.do(http.MethodGet, "/api/v1/events/premiere/report", nil)
	rate := rep.body["admittedPerSecond"].(map[string]any)
	if rep.body["admitted"] != 1.0 || rate["mean"] != 0.0 || rate["configured"] != 5.0 {
		t.Errorf("report %s; want 1 admitted, no mean (nobody waited), configured 5", rep.raw)
	}
	for lang, words := range map[string]string{"en": "Nobody had to wait", "ja": "待った人はいません", "ko": "기다린 사람이 없습니다"} {
		body := string(e.do(http.MethodGet, "/e/premiere/report", nil, "Accept-Language", lang).raw)
		i := strings.Index(body, `id="report-rate"`)
		if i < 0 {
			t.Fatalf("report page in %s has no rate", lang)
		}
		dd := body[i : strings.Index(body[i:], "</dd>")+i]
		if !strings.Contains(dd, words) || !strings.Contains(dd, "5") || strings.Contains(dd, "0 per second") {
			t.Errorf("rate in %s: %q; want %q and the configured 5", lang, dd, words)
		}
		// The chart's line is at the same configured 5.
		if !strings.Contains(body, `<polyline class="ref"`) {
			t.Errorf("report page in %s has no configured line", lang)
		}
	}
}

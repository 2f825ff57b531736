package gateway_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
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
	set := line.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
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
	if _, ok := l.body["nonce"]; ok {
		t.Fatalf("the nonce is out before opening: %s", l.raw)
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
	// The seed is the draw secret's over the event, the kind and the
	// nonce published with it.
	nonce, err := hex.DecodeString(fmt.Sprint(l2.body["nonce"]))
	if err != nil || len(nonce) != 16 {
		t.Fatalf("the nonce after the draw: %s", l2.raw)
	}
	if want, _ := draw.Secret(e.cfg.Auth.DrawSecret).Seed("premiere", draw.Lottery, nonce); !bytes.Equal(seed, want) {
		t.Fatalf("seed %x; want the draw secret's over the nonce %x", seed, want)
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
	// And as the docs tell anyone to check it.
	checkDrawAsTheDocsSay(t, e, "premiere", "lottery", ids[len(ids)-1])

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
	for _, f := range []string{"joined", "admitted", "left", "abandoned", "admittedPerSecond", "fifoInversions", "rankInversions", "waitSeconds", "etaErrorSeconds", "soldOutAt"} {
		if _, ok := rep.body[f]; !ok {
			t.Errorf("report lacks %q: %s", f, rep.raw)
		}
	}
	if w := rep.body["waitSeconds"].(map[string]any); w["count"] != 5.0 || w["p50"] == nil {
		t.Errorf("waitSeconds %v; want 5 waits measured", w)
	}
	if rep.body["joined"] != 5.0 || rep.body["admitted"] != 5.0 || rep.body["fifoInversions"] != 0.0 || rep.body["rankInversions"] != 0.0 {
		t.Errorf("report %s; want 5 joined, 5 admitted, no inversion of either order", rep.raw)
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
		for _, want := range []string{`<svg id="chart-rate"`, `id="lottery-seed"`, `id="lottery-rank"`, `id="report-rank" data-inversions="0"`, l.body["commitment"].(string)} {
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
	set := line.Settings{Mode: "queue", AdmitPerSecond: 5, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
	tick := func() line.TickResult {
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

// listCommands counts the Redis commands a client sends that touch a
// published list of event (its draw's hash or its parts): what a download
// costs Redis.
type listCommands struct {
	event string
	n     atomic.Int64
}

func (l *listCommands) touches(cmd redis.Cmder) bool {
	for _, a := range cmd.Args()[1:] {
		if s, ok := a.(string); ok && strings.HasPrefix(s, "wr:{"+l.event+"}:lottery") {
			return true
		}
	}
	return false
}

func (l *listCommands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *listCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if l.touches(cmd) {
			l.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (l *listCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if l.touches(c) {
				l.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// drawLottery has n fans join event's pre-queue, then opens the sale and
// draws it (the admitter's tick), and returns the published list.
func drawLottery(t *testing.T, e *env, event string, n int) []string {
	t.Helper()
	ctx := context.Background()
	set := line.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
	pre, opens := time.Now().Add(-time.Minute), time.Now().Add(time.Second)
	set.PrequeueOpensAt, set.OpensAt = &pre, &opens
	if err := e.line.PublishSettings(ctx, event, set); err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := e.line.Join(ctx, event, set); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		r := e.do(http.MethodGet, "/api/v1/events/"+event+"/lottery/entries", nil)
		if r.code != http.StatusConflict || r.body["error"] != "not_drawn" || r.hdr.Get("ETag") != "" || strings.Contains(r.hdr.Get("Cache-Control"), "immutable") {
			t.Fatalf("the entries before the draw: %d %s (ETag %q, Cache-Control %q); want 409 not_drawn, as before, cached by nobody", r.code, r.raw, r.hdr.Get("ETag"), r.hdr.Get("Cache-Control"))
		}
		if time.Now().After(opens) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sale never opened")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := e.line.Tick(ctx, event, set); err != nil {
		t.Fatal(err)
	}
	var list bytes.Buffer
	if err := e.line.LotteryEntries(ctx, event, &list); err != nil {
		t.Fatal(err)
	}
	ids := strings.Fields(list.String())
	if len(ids) != n {
		t.Fatalf("the drawn list has %d entries; want %d", len(ids), n)
	}
	return ids
}

// Published lists are cheap (DESIGN.md, "Fair play, third round"). Once
// drawn, the lottery's entries answer with a strong ETag and
// "Cache-Control: public, max-age=31536000, immutable", a 304 to a
// matching If-None-Match, gzip to a client that asks for it (the same
// list); the gateway reads the list from Redis once and serves every
// repeat from its own copy (commands touching the list counted on the
// gateway's Redis client; the server's commandstats logged). An address
// gets 10 downloads a minute, then 429 rate_limited with Retry-After; a
// 304 costs nothing and is still answered; another address is not
// limited by the first. Before the draw the route answers as it did.
func TestPublishedListsAreCheap(t *testing.T) {
	e := setupWith(t, 0, `, trusted_proxies: ["0.0.0.0/32"]`, "")
	ids := drawLottery(t, e, "premiere", 300)
	raw := strings.Join(ids, "\n") + "\n"
	const entries = "/api/v1/events/premiere/lottery/entries"
	from := func(addr string, hdr ...string) resp {
		return e.do(http.MethodGet, entries, nil, append([]string{"X-Forwarded-For", addr}, hdr...)...)
	}
	stats := func() map[string]string {
		info, err := e.rdb.Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, l := range strings.Split(info, "\r\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(k, "cmdstat_") {
				out[k] = v
			}
		}
		return out
	}
	counted := &listCommands{event: "premiere"}
	e.rdb.AddHook(counted)
	began := stats()

	first := from("198.51.100.7")
	etag := first.hdr.Get("ETag")
	if first.code != http.StatusOK || string(first.raw) != raw || !strings.HasPrefix(first.hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("the list once drawn: %d %q (%d bytes); want 200 text/plain, the drawn list", first.code, first.hdr.Get("Content-Type"), len(first.raw))
	}
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 10 {
		t.Errorf("ETag %q; want a strong one", etag)
	}
	for _, r := range []resp{first} {
		if cc := r.hdr.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("Cache-Control %q; want public, max-age=31536000, immutable", cc)
		}
		if !strings.Contains(r.hdr.Get("Vary"), "Accept-Encoding") {
			t.Errorf("Vary %q; want Accept-Encoding", r.hdr.Get("Vary"))
		}
	}
	read := counted.n.Load()
	if read == 0 {
		t.Fatal("the first download read nothing of the list from Redis")
	}

	zipped := from("198.51.100.7", "Accept-Encoding", "br, gzip;q=0.8")
	gzETag := zipped.hdr.Get("ETag")
	if zipped.code != http.StatusOK || zipped.hdr.Get("Content-Encoding") != "gzip" {
		t.Fatalf("asked for gzip: %d, Content-Encoding %q; want 200 gzip", zipped.code, zipped.hdr.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped.raw))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || string(unzipped) != raw {
		t.Fatalf("the gzipped list unzips to %d bytes (%v); want the list's %d", len(unzipped), err, len(raw))
	}
	if gzETag == "" || gzETag == etag {
		t.Errorf("the gzipped list's ETag %q; want its own (the plain one is %q)", gzETag, etag)
	}
	t.Logf("%d entries: %d bytes, %d gzipped", len(ids), len(raw), len(zipped.raw))
	if r := from("198.51.100.7", "Accept-Encoding", "gzip;q=0"); r.hdr.Get("Content-Encoding") != "" || string(r.raw) != raw {
		t.Errorf("gzip;q=0: Content-Encoding %q; want the plain list", r.hdr.Get("Content-Encoding"))
	}

	// 304s: the matching ETag, in a list, weak or not, either coding's.
	for _, inm := range []string{etag, gzETag, `"nope", ` + etag, "W/" + etag, "*"} {
		r := from("198.51.100.7", "If-None-Match", inm)
		if r.code != http.StatusNotModified || len(r.raw) != 0 || r.hdr.Get("ETag") == "" || r.hdr.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Errorf("If-None-Match %s: %d (%d bytes, ETag %q, Cache-Control %q); want 304, no body, the ETag and Cache-Control", inm, r.code, len(r.raw), r.hdr.Get("ETag"), r.hdr.Get("Cache-Control"))
		}
	}
	if r := from("198.51.100.7", "If-None-Match", `"another"`); r.code != http.StatusOK {
		t.Errorf("an If-None-Match of another list: %d; want 200", r.code)
	}
	// 4 downloads so far from 198.51.100.7; 6 more, then the limit.
	for i := 0; i < 6; i++ {
		if r := from("198.51.100.7", "Accept-Encoding", "gzip"); r.code != http.StatusOK {
			t.Fatalf("download %d: %d %s; want 200", 5+i, r.code, r.raw)
		}
	}
	limited := from("198.51.100.7")
	if ra, _ := strconv.Atoi(limited.hdr.Get("Retry-After")); limited.code != http.StatusTooManyRequests || limited.body["error"] != "rate_limited" || ra < 1 || ra > 60 {
		t.Errorf("the 11th download in a minute: %d %s (Retry-After %q); want 429 rate_limited, Retry-After 1..60", limited.code, limited.raw, limited.hdr.Get("Retry-After"))
	}
	if r := from("198.51.100.7", "If-None-Match", etag); r.code != http.StatusNotModified {
		t.Errorf("a 304 past the limit: %d; want 304 (it costs nothing)", r.code)
	}
	if r := from("203.0.113.9", "Accept-Encoding", "gzip"); r.code != http.StatusOK {
		t.Errorf("another address: %d; want 200", r.code)
	}
	if n := counted.n.Load(); n != read {
		t.Errorf("repeats read the list from Redis again: %d commands on it after the first download's %d; want none", n-read, read)
	}
	ended := stats()
	for k, v := range ended {
		if v != began[k] {
			t.Logf("%s: %s -> %s", k, began[k], v)
		}
	}
}

// partReads counts the reads of a published list's parts (the GETs of its
// ranked parts) a client sends.
type partReads struct{ listCommands }

func (p *partReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (p *partReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) == 2 && cmd.Name() == "get" && strings.Contains(fmt.Sprint(a[1]), "{"+p.event+"}:lottery:ranked:") {
			p.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// A list is read from Redis once, however many fans ask for it at the
// same moment: 24 downloads from 24 addresses released together at a cold
// gateway read its one part once, and all get the whole list.
func TestAPublishedListIsReadOnceRaced(t *testing.T) {
	e := setupWith(t, 0, `, trusted_proxies: ["0.0.0.0/32"]`, "")
	ids := drawLottery(t, e, "premiere", 50)
	raw := strings.Join(ids, "\n") + "\n"
	reads := &partReads{listCommands{event: "premiere"}}
	e.rdb.AddHook(reads)
	const fans = 24
	got := make([]resp, fans)
	testenv.Race(fans, func(i int) {
		got[i] = e.do(http.MethodGet, "/api/v1/events/premiere/lottery/entries", nil, "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
	})
	for i, r := range got {
		if r.code != http.StatusOK || string(r.raw) != raw {
			t.Errorf("download %d: %d (%d bytes); want 200 and the list", i, r.code, len(r.raw))
		}
	}
	if n := reads.n.Load(); n != 1 {
		t.Errorf("%d downloads at once read the list's one part %d times; want once", fans, n)
	}
}

// checkDrawAsTheDocsSay checks event's drawn draw of kind (lottery or
// selection) the way docs/QUEUE.md, "Checking a draw", tells an outsider
// to: docs/verify_draw.py (shown in the docs byte for byte) run against
// the gateway on a real port, with the draw secret as an auditor would,
// and, for the lottery, the docs' shell lines for the entry id. Then the
// script against the same publication with its first two entries swapped,
// and with a nonce the seed was not derived from: it must refuse both.
func checkDrawAsTheDocsSay(t *testing.T, e *env, event, kind, id string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("docs/verify_draw.py needs python3: %v", err)
	}
	script := filepath.Join(testenv.Repo(t), "docs", "verify_draw.py")
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(docsText(t, "QUEUE.md"), "```python\n"+string(src)+"```\n") {
		t.Errorf("docs/QUEUE.md does not show docs/verify_draw.py as it is (a ```python block, byte for byte)")
	}
	// What the gateway publishes, and what the checks must find in it.
	pubRes := e.do(http.MethodGet, "/api/v1/events/"+event+"/"+kind, nil)
	listRes := e.do(http.MethodGet, "/api/v1/events/"+event+"/"+kind+"/entries", nil)
	ids := strings.Split(strings.TrimSuffix(string(listRes.raw), "\n"), "\n")
	seed, digest := fmt.Sprint(pubRes.body["seed"]), fmt.Sprint(pubRes.body["entriesDigest"])
	key, err := draw.KeyHex(seed, digest)
	if pubRes.code != http.StatusOK || listRes.code != http.StatusOK || err != nil || len(ids) < 2 {
		t.Fatalf("the %s of %s: %d %s, entries %d %q (%v); want drawn, two entries at least", kind, event, pubRes.code, pubRes.raw, listRes.code, listRes.raw, err)
	}
	rank := slices.Index(ids, id) + 1
	mine := hex.EncodeToString(draw.Of(key, id))
	run := func(base string, env ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(python, script, base, kind, id)
		cmd.Env = append(append(os.Environ(), "WAITROOM_DRAW_SECRET="+e.cfg.Auth.DrawSecret), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go e.srv.App().Listener(ln)
	t.Cleanup(func() { ln.Close() })
	base := "http://" + ln.Addr().String() + "/api/v1/events/" + event
	out, err := run(base)
	if want := fmt.Sprintf("%s: draw %s, rank %d\n", id, mine, rank); err != nil || !strings.Contains(out, kind+" checked: ") || !strings.Contains(out, want) {
		t.Errorf("docs/verify_draw.py on the %s of %s: %v\n%s\nwant it checked, and %q", kind, event, err, out, want)
	}
	if kind == "lottery" {
		block := docsBlock(t, "QUEUE.md", "sh", "API=localhost:8080/api/v1/events/premiere\n")
		dir := t.TempDir()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", fmt.Sprintf("API=%s TICKET_ID=%s\n%s", base, id, block))
		cmd.Dir = dir // where the lines leave lottery.json and entries.txt
		got, err := cmd.CombinedOutput()
		for _, want := range []string{pubRes.body["commitment"].(string) + "  -\n", digest + "  -\n", mine + "\n", fmt.Sprintf("%d:%s\n", rank, id)} {
			if err != nil || !strings.Contains(string(got), want) {
				t.Errorf("docs/QUEUE.md's shell lines for %s: %v\n%s\nwant %q among them", id, err, got, want)
			}
		}
	}

	// The same publication tampered with, served by a stand-in.
	tampered := func(pub []byte, list []string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/api/v1/events/" + event + "/" + kind:
				w.Write(pub)
			case "/api/v1/events/" + event + "/" + kind + "/entries":
				io.WriteString(w, strings.Join(list, "\n")+"\n")
			default:
				http.NotFound(w, r)
			}
		}))
		defer srv.Close()
		out, err := run(srv.URL + "/api/v1/events/" + event)
		if err == nil {
			t.Errorf("docs/verify_draw.py passed a tampered %s:\n%s", kind, out)
		}
		return out
	}
	swapped := slices.Clone(ids)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	if out := tampered(pubRes.raw, swapped); !strings.Contains(out, "not in the order of the draws") {
		t.Errorf("two entries swapped: %s; want the order refused", out)
	}
	nonce := pubRes.body["nonce"].(string)
	other := strings.Replace(string(pubRes.raw), nonce, strings.Repeat("0", len(nonce)), 1)
	if out := tampered([]byte(other), ids); !strings.Contains(out, "not the draw secret's") {
		t.Errorf("another nonce: %s; want the seed refused", out)
	}
}

// docsText is docs/name's text.
func docsText(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Repo(t), "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docsBlock is the rest of docs/name's ```lang block whose first line is
// first, as a reader copies it but for that line (the test gives its own).
func docsBlock(t *testing.T, name, lang, first string) string {
	t.Helper()
	_, block, ok := strings.Cut(docsText(t, name), "```"+lang+"\n"+first)
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/%s has no %s block starting %q", name, lang, first)
	}
	return block
}

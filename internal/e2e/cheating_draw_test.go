package e2e_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/presale/presaletest"
	"github.com/waitroom/waitroom/internal/testsupport/atrest"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// The third round of TestCheating, the draw's part (DESIGN.md, "Fair play,
// third round": the draw's seed is not in Redis before the draw), on the
// same stack: a sale with a pre-queue and an insider who reads every key
// and value of Redis (or its AOF, or a backup) while the pre-queue runs.
// What it read holds neither the seed nor anything that gives it without
// the draw secret, which only the config holds; once drawn, the lottery is
// recomputed from what it publishes alone. TestPresaleSale does the same
// for the presale's selection, read before its close. docs/RELIABILITY.md,
// section 7, has the rows.

const insiderEvent = "insider"

// insiderOpens is the insider sale's opening until the test brings it
// forward (a time no other event of the stack has, so the edit is its).
const insiderOpens = "2033-03-03T00:00:00Z"

// insiderEventYAML is the sale the insider reads: a pre-queue open since
// long ago, the opening far off.
var insiderEventYAML = fmt.Sprintf(`  - id: %q
    name: "A sale an insider reads"
    prequeue_opens_at: "2026-01-01T00:00:00Z"
    opens_at: %q
    admission: {admit_per_second: 500, max_active: 2000, abandon_after: "2m"}
    showtimes:
      - {id: 39, title: "Insider 19:00", starts_at: "2026-12-01T19:00:00Z", rows: 10, seats_per_row: 30, price_cents: 1000}
`, insiderEvent, insiderOpens)

// insiderReadsRedis: fans join the pre-queue (some leave), the insider
// reads all of Redis, the operator brings the opening forward; the lottery
// drawn then owes nothing to what the insider read.
func insiderReadsRedis(t *testing.T, s *stack.Stack, hc *http.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tl := newTally()
	var tickets []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &player{t: t, s: s, hc: hc, tally: tl, ip: fmt.Sprintf("10.70.%d.%d", i/250, i%250+1)}
			code, _, body := p.call(ctx, "join", http.MethodPost, "/api/v1/events/"+insiderEvent+"/tickets", nil, nil)
			if code != http.StatusCreated {
				t.Errorf("pre-queue join: %d %v", code, body)
				return
			}
			mu.Lock()
			tickets = append(tickets, body["ticket"].(string))
			mu.Unlock()
		}()
	}
	wg.Wait()
	leaver := &player{t: t, s: s, hc: hc, tally: tl, ip: "10.70.9.9"}
	for _, tk := range tickets[:10] {
		if code, _, _ := leaver.call(ctx, "leave", http.MethodDelete, "/api/v1/events/"+insiderEvent+"/tickets/"+tk, nil, nil); code != http.StatusNoContent {
			t.Errorf("leave: %d", code)
		}
	}
	before := readEverything(t, s)

	opens := time.Now().Add(2 * time.Second).UTC()
	s.EditConfig(t, func(c string) string {
		return strings.Replace(c, fmt.Sprintf("opens_at: %q", insiderOpens), fmt.Sprintf("opens_at: %q", opens.Format(time.RFC3339Nano)), 1)
	})
	fan := &player{t: t, s: s, hc: hc, tally: tl, ip: "10.70.8.8"}
	var lot map[string]any
	mustWait(t, "the insider's lottery drawn", 30*time.Second, func() bool {
		_, _, lot = fan.call(ctx, "lottery", http.MethodGet, "/api/v1/events/"+insiderEvent+"/lottery", nil, nil)
		return lot["seed"] != nil
	})
	list := download(t, s, "/api/v1/events/"+insiderEvent+"/lottery/entries")
	if n := bytes.Count(list, []byte("\n")); n != 60 || num(lot["entries"]) != 60 {
		t.Fatalf("%d entries listed, %v published; want the 60 who joined, those who left too", n, lot["entries"])
	}
	insiderLearnedNothing(t, before, lot, insiderEvent, draw.Lottery, list)
	if n := tl.status5xx(); n > 0 {
		t.Errorf("%d answers were 5xx", n)
	}
}

// readEverything is every key and value the stack's Redis holds now (every
// database), as an insider reading Redis, its AOF or a backup has them.
func readEverything(t *testing.T, s *stack.Stack) []atrest.Item {
	t.Helper()
	c, ok := s.RDB.(*redis.Client)
	if !ok {
		t.Fatalf("the stack's Redis is a %T, not one server", s.RDB)
	}
	items, err := atrest.Dump(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// download is the body of a GET of the gateway's path.
func download(t *testing.T, s *stack.Stack, path string) []byte {
	t.Helper()
	res, err := http.Get(s.Gateway + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, res.StatusCode, err)
	}
	return raw
}

// insiderLearnedNothing checks a draw (pub, its route's JSON once drawn;
// list, its published list) against what an insider read of Redis before
// it (before): no key or value held the seed, raw or hex, nor the draw's
// key, nor the draw secret; what it held, the nonce, gives the seed only
// with that secret (HMAC-SHA256 over the event, the kind and the nonce),
// whose SHA-256 is the commitment published before the entries froze; and
// the order is recomputed from what is published alone.
func insiderLearnedNothing(t *testing.T, before []atrest.Item, pub map[string]any, event string, kind draw.Kind, list []byte) {
	t.Helper()
	seedHex, _ := pub["seed"].(string)
	nonceHex, _ := pub["nonce"].(string)
	commitment, _ := pub["commitment"].(string)
	digestHex, _ := pub["entriesDigest"].(string)
	seed, err := hex.DecodeString(seedHex)
	if err != nil || len(seed) != 32 {
		t.Fatalf("published seed %q", seedHex)
	}
	digest, _ := hex.DecodeString(digestHex)
	key := sha256.Sum256(append(append([]byte(nil), seed...), digest...))
	hadNonce := false
	for _, it := range before {
		text := strings.ToLower(it.Text)
		for what, secret := range map[string]string{"the seed": seedHex, "the draw's key": hex.EncodeToString(key[:])} {
			if strings.Contains(text, secret) {
				t.Errorf("%s was in Redis before the draw: key %q (%s)", what, it.Key, it.Part)
			}
		}
		for what, secret := range map[string]string{"the seed": string(seed), "the draw secret": stack.DrawSecret} {
			if strings.Contains(it.Text, secret) {
				t.Errorf("%s was in Redis before the draw: key %q (%s)", what, it.Key, it.Part)
			}
		}
		hadNonce = hadNonce || strings.Contains(text, nonceHex)
	}
	if nonceHex == "" || !hadNonce {
		t.Errorf("the nonce %q published was not what Redis held before the draw", nonceHex)
	}
	nonce, _ := hex.DecodeString(nonceHex)
	m := hmac.New(sha256.New, []byte(stack.DrawSecret))
	m.Write([]byte("waitroom draw\n" + event + "\n" + string(kind) + "\n"))
	m.Write(nonce)
	if !bytes.Equal(m.Sum(nil), seed) {
		t.Errorf("the seed is not HMAC-SHA256 of the draw secret over %s, %s and the nonce", event, kind)
	}
	if err := presaletest.CheckDraw(seedHex, commitment, digestHex, list); err != nil {
		t.Errorf("the %s recomputed from what it publishes: %v", kind, err)
	}
}

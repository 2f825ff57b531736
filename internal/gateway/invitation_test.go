package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/rdb"
)

// An invitation buys once (DESIGN.md, "Fair play, third round"), at the
// gateway: once the booking of an invited account's place is confirmed
// (the booking core's relay frees the place: queue.Store.CompleteFor), a
// join of the account in its window is 403 invitation_used, from the API
// and from the page's form (which says so in the fan's language).
func TestInvitationUsedAtTheGateway(t *testing.T) {
	closes := time.Now().Add(1500 * time.Millisecond)
	yaml := fmt.Sprintf(presaleYAML, closes.Format(time.RFC3339Nano), time.Now().Add(-time.Hour).Format(time.RFC3339), closes.Format(time.RFC3339Nano))
	e := setupAccountsWith(t, yaml)
	acct := []string{"X-Waitroom-Account", e.token("alice")}
	if r := e.do(http.MethodPost, "/api/v1/events/tour/registrations", nil, acct...); r.code != http.StatusCreated {
		t.Fatalf("register: %d %s", r.code, r.raw)
	}
	time.Sleep(time.Until(closes) + 10*time.Millisecond)
	ev, _ := e.cfg.Event("tour")
	if err := presale.New(rdb.New(e.rdb), e.line, []byte(e.cfg.Auth.TicketSecret), "admitter").WithDrawSecret([]byte(e.cfg.Auth.DrawSecret)).Step(context.Background(), "tour", policy.PlanFor(*ev)); err != nil {
		t.Fatal(err)
	}
	r := e.join("tour", acct...)
	if r.code != http.StatusCreated {
		t.Fatalf("alice joins in her window: %d %s", r.code, r.raw)
	}
	ticket := r.body["ticket"].(string)
	tk, err := e.parse("tour", ticket)
	id := tk.ID()
	if err != nil {
		t.Fatal(err)
	}
	// Her turn: she is let in (as the admitter would) and books.
	set := line.Settings{Mode: line.ModeQueue, AdmitPerSecond: 100, MaxActive: 100, AccessTTL: time.Minute, AbandonAfter: time.Minute}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := e.line.Tick(context.Background(), "tour", set); err != nil {
			t.Fatal(err)
		}
		if s := e.do(http.MethodGet, "/api/v1/events/tour/tickets/"+ticket, nil); s.body["status"] == "admitted" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alice is never let in")
		}
	}
	if err := e.line.CompleteFor(context.Background(), "tour", id, "alice"); err != nil {
		t.Fatal(err)
	}
	if r := e.join("tour", acct...); r.code != http.StatusForbidden || r.body["error"] != "invitation_used" || r.body["message"] == "" {
		t.Fatalf("alice joins again after her booking: %d %s; want 403 invitation_used", r.code, r.raw)
	}
	form := e.do(http.MethodPost, "/e/tour/join", strings.NewReader(""), "Content-Type", "application/x-www-form-urlencoded",
		"Sec-Fetch-Site", "same-origin", "Cookie", "wr_u="+e.token("alice"))
	if form.code != http.StatusSeeOther || !strings.HasSuffix(form.hdr.Get("Location"), "e=invitation_used") {
		t.Fatalf("the join form after her booking: %d %v", form.code, form.hdr)
	}
	page := e.do(http.MethodGet, form.hdr.Get("Location"), nil, "Cookie", "wr_u="+e.token("alice")+"; wr_lang=ja")
	if page.code != http.StatusOK || !strings.Contains(string(page.raw), "この招待はすでに使用されました") {
		t.Fatalf("the room page's notice: %d %s", page.code, page.raw)
	}
}

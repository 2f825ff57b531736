package booking_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/line"
)

// The booking API's parsers of outside input, fuzzed through the real
// handler (in process, no network) on a real database: the hold's and the
// checkout's bodies, Idempotency-Key, and the operators' credit. Whatever
// comes, the answer is never a 5xx, a refusal is a 4xx with one of the
// contract's codes, and what is accepted is what the contract says.

// fuzzCodes are the contract's error codes of the routes fuzzed here.
var fuzzCodes = map[string]bool{
	"invalid_request": true, "admission_required": true, "wrong_event": true, "not_found": true,
	"seats_unavailable": true, "sold_out": true, "hold_expired": true, "hold_booked": true,
	"too_many_seats": true, "idempotency_key_reused": true, "rate_limited": true,
	"account_required": true, "insufficient_points": true, "payment_open": true, "unauthorized": true,
}

// fuzzEnv is setup's env with what a fuzz target needs in its callback
// (where e.t, the *testing.F, must not be used).
type fuzzEnv struct {
	*env
	h   http.Handler
	seq atomic.Int64
}

func fuzzSetup(f *testing.F) *fuzzEnv {
	e := setup(f)
	return &fuzzEnv{env: e, h: e.srv.Config.Handler}
}

// fan is a customer of live no other execution uses (its own hold limits),
// admitted through the line (the booking core asks it whether the pass's
// ticket is active).
func (fe *fuzzEnv) fan(t *testing.T) booking.Pass {
	r, err := fe.line.JoinWith(context.Background(), "live", admitAtOnce, line.JoinOptions{})
	if err != nil || r.State != line.Admitted {
		t.Fatalf("join live: %+v, %v; want admitted at once", r, err)
	}
	return booking.NewPass(r.ID, "", "live")
}

// serve answers one request in process.
func (fe *fuzzEnv) serve(t *testing.T, p booking.Pass, method, path string, body []byte, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, "http://booking.test/", bytes.NewReader(body))
	req.URL.Path, req.URL.RawPath = path, ""
	if p.Customer != "" {
		now := time.Now()
		tok, err := fe.signer.MintFor(p.Ticket, p.Event, p.Account, now, now.Add(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range hdr {
		req.Header[k] = []string{v} // as it came: no canonical check of the value
	}
	rec := httptest.NewRecorder()
	fe.h.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: %d with a body that is not a JSON object: %q", method, path, rec.Code, rec.Body.Bytes())
		}
	}
	if rec.Code >= 500 {
		t.Fatalf("%s %s %q (headers %q): %d %v; want no 5xx", method, path, body, hdr, rec.Code, out)
	}
	if rec.Code >= 400 {
		if code, _ := out["error"].(string); !fuzzCodes[code] {
			t.Fatalf("%s %s %q: %d %v; want a contract error code", method, path, body, rec.Code, out)
		}
	}
	return rec.Code, out
}

// lapse ends a hold now, so that a long fuzzing run never runs out of places.
func (fe *fuzzEnv) lapse(t *testing.T, holdID string) {
	for _, q := range []string{
		`UPDATE seats SET hold_expires_at = now() - interval '1 minute' WHERE hold_id = $1 AND status = 'HELD'`,
		`UPDATE ga_places SET expires_at = now() - interval '1 minute' WHERE hold_id = $1`,
		`UPDATE holds SET expires_at = now() - interval '1 minute' WHERE id = $1`,
	} {
		if _, err := fe.pool.Exec(context.Background(), q, holdID); err != nil {
			t.Fatal(err)
		}
	}
}

// giveBack ends a hold as lapse does, and gives back the places a checkout
// of it booked: a booked place counts against its block for good, so
// without it every points checkout (paid at once) would take one of
// FLOOR's 250 for the run, and a long run's holds would all be sold_out.
func (fe *fuzzEnv) giveBack(t *testing.T, holdID string) {
	fe.lapse(t, holdID)
	if _, err := fe.pool.Exec(context.Background(),
		`UPDATE ga_places SET status = 'RELEASED' WHERE hold_id = $1 AND status = 'BOOKED'`, holdID); err != nil {
		t.Fatal(err)
	}
}

// FuzzHold: POST /showtimes/{id}/holds, its path id and its JSON body
// ({"seats","generalAdmission"}). A 201 is a hold of exactly what a body of
// known fields asked, of a showtime of the pass's event; anything else is a
// 4xx.
func FuzzHold(f *testing.F) {
	fe := fuzzSetup(f)
	for _, s := range []struct{ id, body string }{
		{"43", `{"seats":["A1","A2"]}`},
		{"43", `{"seats":["B3"],"generalAdmission":{"FLOOR":2}}`},
		{"43", `{"generalAdmission":{"BALCONY":8}}`},
		{"43", `{"generalAdmission":{"FLOOR":9223372036854775807,"BALCONY":9223372036854775807}}`},
		{"43", `{"seats":["A1","A1"]}`},
		{"43", `{"seats":["A02","a2","F1","A31"]}`},
		{"43", `{"seats":[],"generalAdmission":{}}`},
		{"43", `{"seats":["A2"],"vip":true}`},
		{"43", `{"seats":["A2"]}{}`},
		{"42", `{"seats":["A1"]}`},
		{"0", `{}`},
		{"-1", `seats`},
		{"99999999999999999999", `{"seats":null}`},
	} {
		f.Add(s.id, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		code, out := fe.serve(t, fe.fan(t), http.MethodPost, "/api/v1/booking/showtimes/"+url.PathEscape(id)+"/holds", body, nil)
		if code != http.StatusCreated {
			return
		}
		var in booking.HoldInput
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		holdID, _ := out["holdId"].(string)
		// The path's id is read as a decimal integer: "043" and "+43" are
		// showtime 43 too (corpus b7be4c37…).
		if n, err := strconv.ParseInt(id, 10, 64); err != nil || n != 43 || dec.Decode(&in) != nil || holdID == "" {
			t.Fatalf("hold of showtime %q with %q: 201 %v; want a refusal", id, body, out)
		}
		// The seats held are those asked, in seat order (corpus 85bb8715…);
		// encoding/json reads a field's name in any case ("seAts").
		want := slices.Sorted(slices.Values(in.Seats))
		if got := fmt.Sprint(out["seats"]); len(in.Seats) > 0 && got != fmt.Sprint(want) {
			t.Fatalf("hold of %q: seats %s; want %v", body, got, want)
		}
		fe.lapse(t, holdID)
	})
}

// FuzzCheckout: POST /holds/{id}/checkout, its Idempotency-Key and its
// optional JSON body ({"method"}). Each execution takes a hold of its own
// first, for an account with points (so "points" can pay). A key the
// contract refuses (1–255 printable ASCII characters) is 400
// invalid_request, whatever the body; a 201 is a booking. (A fan without an
// account asking to pay with points is told 403 account_required before
// anything about the key: corpus 2f1520de… found it, and now has an
// account.)
func FuzzCheckout(f *testing.F) {
	fe := fuzzSetup(f)
	for _, s := range []struct{ key, body string }{
		{"k-1", ``},
		{"550e8400-e29b-41d4-a716-446655440000", `{"method":"card"}`},
		{"k-2", `{"method":"points"}`},
		{"k-3", `{"method":"cash"}`},
		{"k-4", `{"method":"card","x":1}`},
		{strings.Repeat("k", 255), ` `},
		{strings.Repeat("k", 256), ``},
		{"", ``},
		{"tab\tkey", ``},
		{"caf\xc3\xa9", ``},
		{"k-5", `[]`},
		{"k-6", `{"method":"card"}{}`},
	} {
		f.Add(s.key, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, key string, body []byte) {
		p := fe.fan(t)
		p = booking.NewPass(p.Ticket, "fz-"+p.Ticket, p.Event)
		points := int64(1_000_000)
		if _, err := fe.svc.Credit(context.Background(), p.Account, booking.CreditInput{Points: &points, Reference: "fz"}); err != nil {
			t.Fatalf("credit: %v", err)
		}
		h, err := fe.svc.Hold(context.Background(), p, 43, booking.HoldInput{GeneralAdmission: map[string]int{"FLOOR": 1}})
		if err != nil {
			t.Fatalf("hold: %v", err)
		}
		defer fe.giveBack(t, h.ID)
		code, out := fe.serve(t, p, http.MethodPost, "/api/v1/booking/holds/"+h.ID+"/checkout", body, map[string]string{"Idempotency-Key": key})
		validKey := len(key) >= 1 && len(key) <= 255
		for i := 0; i < len(key); i++ {
			validKey = validKey && key[i] >= 0x20 && key[i] <= 0x7e
		}
		switch {
		case !validKey && code != http.StatusBadRequest:
			t.Fatalf("checkout with Idempotency-Key %q: %d %v; want 400 invalid_request", key, code, out)
		case code == http.StatusCreated && out["bookingId"] == nil:
			t.Fatalf("checkout with %q: 201 %v; want a booking", body, out)
		}
	})
}

// FuzzCredit: the operators' POST /admin/wallets/{account}/credits (the
// gateway forwards /api/v1/admin/wallets/… here), its account and its JSON
// body ({"points","reference"}). A 201 is a credit of 1… points to a
// well-formed account, and its balance is the wallet's before it with the
// points added, or unchanged when the account's reference credited it
// already ("the same reference credits once": the executions of one run
// share a database, so a reference comes back, as in the last seed).
func FuzzCredit(f *testing.F) {
	fe := fuzzSetup(f)
	for _, s := range []struct{ account, body string }{
		{"acct-42", `{"points":100,"reference":"order-1"}`},
		{"user@example.com", `{"points":1000000000000,"reference":"r"}`},
		{"acct-42", `{"points":1000000000001,"reference":"r2"}`},
		{"acct-42", `{"points":0,"reference":"r3"}`},
		{"acct-42", `{"points":-5,"reference":"r4"}`},
		{"acct-42", `{"points":1.5,"reference":"r5"}`},
		{"acct-42", `{"points":"100","reference":"r6"}`},
		{"acct-42", `{"points":100}`},
		{"acct-42", `{"points":100,"reference":"r7","extra":1}`},
		{"bad account!", `{"points":1,"reference":"r8"}`},
		{"acct-42", `null`},
		{"acct-42", `{"points":900,"reference":"order-1"}`}, // order-1 credited 100 already: 201, balance 100
	} {
		f.Add(s.account, []byte(s.body))
	}
	admin := map[string]string{"Authorization": "Bearer " + testAdminToken}
	f.Fuzz(func(t *testing.T, account string, body []byte) {
		var in booking.CreditInput
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		known := dec.Decode(&in) == nil && in.Points != nil
		// The wallet before, and whether this reference credited it: the
		// account the handler reads is the path's segment as sent (serve
		// leaves the escapes in it); only a reference of printable ASCII
		// can credit, and only such text is asked of the database.
		var before int64
		var seen bool
		if known = known && printableASCII(in.Reference); known {
			if err := fe.pool.QueryRow(context.Background(),
				`SELECT coalesce((SELECT balance FROM wallets WHERE account_id = $1), 0),
				        EXISTS (SELECT 1 FROM wallet_ledger WHERE account_id = $1 AND kind = 'credit' AND reference = $2)`,
				url.PathEscape(account), in.Reference).Scan(&before, &seen); err != nil {
				t.Fatal(err)
			}
		}
		code, out := fe.serve(t, booking.Pass{}, http.MethodPost, "/api/v1/booking/admin/wallets/"+url.PathEscape(account)+"/credits", body, admin)
		if code != http.StatusCreated {
			return
		}
		b, ok := out["balance"].(float64)
		if !known || *in.Points < 1 || !ok {
			t.Fatalf("credit of %q with %q: 201 %v; want a refusal", account, body, out)
		}
		want := before + *in.Points
		if seen {
			want = before
		}
		if b != float64(want) {
			t.Fatalf("credit of %q with %q (balance %d before, reference credited already: %v): 201 %v; want balance %d", account, body, before, seen, out, want)
		}
	})
}

// printableASCII is what a reference may be: printable ASCII (its length
// is the service's to check).
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

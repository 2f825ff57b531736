package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// apiFan is a fan who goes through the gateway's JSON API, beside the
// browsers of a scenario: join, wait, hold, pay.
type apiFan struct {
	t            *testing.T
	base, event  string
	ticket, pass string
	hold_        string
}

func (f *apiFan) do(method, path string, body any, hdr map[string]string) (int, map[string]any) {
	f.t.Helper()
	code, _, raw, err := sendJSON(context.Background(), http.DefaultClient, f.base, method, path, f.pass, hdr, body)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return code, out
}

// sendJSON makes one request to base+path with a JSON body (when body is
// not nil), the pass as a Bearer token (when given) and hdr, and returns the
// answer.
func sendJSON(ctx context.Context, hc *http.Client, base, method, path, pass string, hdr map[string]string, body any) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if pass != "" {
		req.Header.Set("Authorization", "Bearer "+pass)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, raw, err
}

func (f *apiFan) join() {
	f.t.Helper()
	code, out := f.do(http.MethodPost, "/api/v1/events/"+f.event+"/tickets", nil, nil)
	if code != http.StatusCreated {
		f.t.Fatalf("api fan join: %d %v", code, out)
	}
	f.ticket = out["ticket"].(string)
}

func (f *apiFan) waitAdmitted() {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		code, out := f.do(http.MethodGet, "/api/v1/events/"+f.event+"/tickets/"+f.ticket, nil, nil)
		if code == http.StatusOK && out["status"] == "admitted" {
			f.pass = out["accessToken"].(string)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.t.Fatal("api fan never admitted")
}

func (f *apiFan) hold(seats []string) {
	f.t.Helper()
	path := fmt.Sprintf("/api/v1/booking/showtimes/%d/holds", showtimeOf(f.t, f.base, f.event))
	code, out := f.do(http.MethodPost, path, map[string]any{"seats": seats}, nil)
	if code != http.StatusCreated {
		f.t.Fatalf("api fan hold %v: %d %v", seats, code, out)
	}
	f.hold_ = out["holdId"].(string)
}

// checkout checks the hold out: the booking and the provider's page.
func (f *apiFan) checkout() (bookingID, paymentURL string) {
	f.t.Helper()
	code, out := f.do(http.MethodPost, "/api/v1/booking/holds/"+f.hold_+"/checkout", nil, map[string]string{"Idempotency-Key": "api-" + f.hold_})
	if code != http.StatusCreated {
		f.t.Fatalf("api fan checkout: %d %v", code, out)
	}
	bookingID, _ = out["bookingId"].(string)
	paymentURL, _ = out["paymentUrl"].(string)
	if bookingID == "" || !strings.HasPrefix(paymentURL, "http") {
		f.t.Fatalf("checkout answer %v; want a booking and an absolute paymentUrl", out)
	}
	return bookingID, paymentURL
}

// providerPage reads the provider's hosted page.
func (f *apiFan) providerPage(paymentURL string) (int, string) {
	f.t.Helper()
	res, err := http.Get(paymentURL)
	if err != nil {
		f.t.Fatalf("GET %s: %v", paymentURL, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// press presses Pay (with an outcome, "" for the provider's first) or
// Cancel on the provider's page, and returns its answer's status (303: sent
// back to the booking page).
func (f *apiFan) press(paymentURL, action, outcome string) int {
	f.t.Helper()
	form := url.Values{"action": {action}}
	if outcome != "" {
		form.Set("outcome", outcome)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.PostForm(paymentURL, form)
	if err != nil {
		f.t.Fatalf("POST %s: %v", paymentURL, err)
	}
	res.Body.Close()
	return res.StatusCode
}

// bookingStatus reads the fan's booking through the gateway.
func (f *apiFan) bookingStatus(id string) string {
	f.t.Helper()
	code, b := f.do(http.MethodGet, "/api/v1/booking/bookings/"+id, nil, nil)
	if code != http.StatusOK {
		return fmt.Sprintf("HTTP %d", code)
	}
	st, _ := b["status"].(string)
	return st
}

// pay checks the hold out, pays on the provider's page, and waits until the
// booking is confirmed.
func (f *apiFan) pay() {
	f.t.Helper()
	id, paymentURL := f.checkout()
	if code := f.press(paymentURL, "pay", "succeed"); code != http.StatusSeeOther {
		f.t.Fatalf("api fan pays: %d; want 303", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if f.bookingStatus(id) == "CONFIRMED" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.t.Fatal("api fan's booking never confirmed")
}

// showtimeOf is the event's first showtime, from the event route.
func showtimeOf(t *testing.T, base, event string) int64 {
	t.Helper()
	ev := getEvent(t, base, event)
	if ev.err != nil || len(ev.Showtimes) == 0 {
		t.Fatalf("event %s: %d %v, %d showtimes", event, ev.code, ev.err, len(ev.Showtimes))
	}
	return ev.Showtimes[0].ID
}

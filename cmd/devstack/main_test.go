package main

import (
	"net"
	"net/http/httptest"
	"net/smtp"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/testsupport/mailsink"
)

// shipped is configs/waitroom.yaml as the processes read it with nothing
// in the environment.
func shipped(t *testing.T) *config.Config {
	t.Helper()
	b, err := os.ReadFile("../../configs/waitroom.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(b, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Fans' browsers never need the booking core's API port: the shipped config
// binds it and the admitter to loopback, and gives the simulator's hosted
// page (where paymentUrl sends fans) a listener of its own,
// 127.0.0.1:8083; make run binds both to loopback whatever config it runs.
func TestTheBookingCoreListensOnLoopback(t *testing.T) {
	cfg := shipped(t)
	for name, addr := range map[string]string{"booking.addr": cfg.Booking.Addr, "admitter.addr": cfg.Admitter.Addr} {
		if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
			t.Errorf("the shipped %s is %q; want 127.0.0.1:port", name, addr)
		}
	}
	sim := cfg.Booking.Payment.Simulator
	if sim.Addr != "127.0.0.1:8083" || sim.PageURL != "http://127.0.0.1:8083" {
		t.Errorf("the shipped simulator page listens on %q, fans sent to %q; want 127.0.0.1:8083 and http://127.0.0.1:8083", sim.Addr, sim.PageURL)
	}
	if env := loopback(cfg, func(string) string { return "" }); len(env) != 0 {
		t.Errorf("make run with the shipped config overrides %q; want nothing (loopback already)", env)
	}

	none := func(string) string { return "" }
	for _, tc := range []struct {
		name           string
		booking, admit string
		getenv         func(string) string
		want           []string
	}{
		{"no host", ":8081", ":8082", none, []string{"WAITROOM_BOOKING_ADDR=127.0.0.1:8081", "WAITROOM_ADMITTER_ADDR=127.0.0.1:8082"}},
		{"every interface", "0.0.0.0:9081", "[::]:9082", none, []string{"WAITROOM_BOOKING_ADDR=127.0.0.1:9081", "WAITROOM_ADMITTER_ADDR=127.0.0.1:9082"}},
		{"loopback already", "localhost:8081", "[::1]:8082", none, nil},
		{"set in the environment", ":8081", ":8082", func(k string) string {
			if k == "WAITROOM_BOOKING_ADDR" {
				return ":7000"
			}
			return ""
		}, []string{"WAITROOM_ADMITTER_ADDR=127.0.0.1:8082"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *cfg
			c.Booking.Addr, c.Admitter.Addr = tc.booking, tc.admit
			if got := loopback(&c, tc.getenv); !slices.Equal(got, tc.want) {
				t.Errorf("loopback(%s, %s) = %q; want %q", tc.booking, tc.admit, got, tc.want)
			}
		})
	}
}

// The demo inboxes page shows each demo account's emails, as the sink
// received them: the subject, and the HTML in a sandboxed frame.
func TestMailPageShowsTheInboxes(t *testing.T) {
	sink, err := mailsink.Start(mailsink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	msg := "Subject: =?UTF-8?q?It's_your_turn:_Premiere?=\r\nContent-Type: text/html; charset=UTF-8\r\n\r\n<p>Come back</p>\r\n"
	if err := smtp.SendMail(sink.Addr, nil, "noreply@example.com", []string{demoEmail("alice")}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	originHandler(nil, "http://localhost:8080", sink).ServeHTTP(rec, httptest.NewRequest("GET", "/mail", nil))
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, "It&#39;s your turn: Premiere") || !strings.Contains(body, `id="inbox-alice"`) || !strings.Contains(body, "sandbox=") {
		t.Fatalf("/mail: %d\n%s", rec.Code, body)
	}
}

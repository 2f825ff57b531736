package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// The gate stretches the window of a hold by the booking core's header
// (line.HoldExpiresHeader), never reading the hold's body: an answer whose
// body it could not parse still gets its longer pass, and the header, the
// core's word to the gate, never reaches the fan.
func TestHoldStretchedByTheCoresHeader(t *testing.T) {
	e := setup(t, 0)
	ticket, token := e.admit("premiere")
	id := e.idOf("premiere", ticket)
	e.upstream.holdBody.Store(`not the JSON of a hold`)

	r := e.do(http.MethodPost, "/api/v1/booking/showtimes/42/holds", strings.NewReader(`{"seats":["A1"]}`), "Authorization", "Bearer "+token)
	if r.code != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.code, r.raw)
	}
	if d := time.Until(queuetest.Of(t, e.rdb, "premiere").Window(id)); d < 19*time.Minute || d > 21*time.Minute {
		t.Errorf("active expiry in %v; want about 20m (the hold's expiry, from the header)", d)
	}
	if r.hdr.Get("X-Waitroom-Access-Token") == "" {
		t.Error("no longer pass after the hold")
	}
	if v := r.hdr.Get(line.HoldExpiresHeader); v != "" {
		t.Errorf("the fan got %s: %q; want it kept between the core and the gate", line.HoldExpiresHeader, v)
	}
}

// A hold through the gate asks Redis once at the gate and once at the
// booking core (issue 41's goal; DESIGN.md, Gateway API): the core checks
// the pass's place in the call that reserves the hold's places, so the
// gate, which only verifies the pass, asks the line only to stretch the
// window once the hold is taken. A pass whose place is gone is still
// answered 401 admission_required (by the core's check), and an event of
// sliding sessions keeps the gate's check, which renews the place.
func TestAHoldAsksTheLineOnceAtTheGate(t *testing.T) {
	e := setup(t, 0)
	ticket, token := e.admit("premiere")
	id := e.idOf("premiere", ticket)
	calls := func() (stop func() int) {
		return testenv.Monitor(t, e.redis.Addr, e.rdb, func(l string) bool {
			return strings.Contains(strings.ToUpper(l), `"FCALL"`) && strings.Contains(l, `"`+id+`"`)
		})
	}

	stop := calls()
	r := e.do(http.MethodPost, "/api/v1/booking/showtimes/42/holds", strings.NewReader(`{"seats":["A1"]}`), "Authorization", "Bearer "+token)
	if r.code != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.code, r.raw)
	}
	if n := stop(); n != 2 {
		t.Errorf("a hold called the line's functions %d times with its ticket; want 2 (the core's check, the gate's stretch)", n)
	}
	if r.hdr.Get("X-Waitroom-Access-Token") == "" {
		t.Error("no longer pass after the hold")
	}

	if err := e.line.Complete(context.Background(), "premiere", id); err != nil {
		t.Fatal(err)
	}
	before := queuetest.Of(t, e.rdb, "premiere").Window(id)
	r = e.do(http.MethodPost, "/api/v1/booking/showtimes/42/holds", strings.NewReader(`{"seats":["A2"]}`), "Authorization", "Bearer "+token)
	if r.code != http.StatusUnauthorized || r.body["error"] != "admission_required" {
		t.Fatalf("a hold after the place was freed: %d %s; want 401 admission_required", r.code, r.raw)
	}
	if r.hdr.Get("X-Waitroom-Access-Token") != "" {
		t.Error("a refused hold handed out a pass")
	}
	if after := queuetest.Of(t, e.rdb, "premiere").Window(id); !after.Equal(before) {
		t.Errorf("a refused hold moved the window: %v → %v", before, after)
	}
}

package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
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

package line

import (
	"errors"
	"regexp"
	"strconv"
	"testing"
)

// idPattern is a well-formed ticket id, as the line's store checks one.
var idPattern = regexp.MustCompile(`^[0-9a-z]{1,13}\.[A-Za-z0-9_-]{22}$`)

// ID builds in one buffer what base36(seq) "." base64url(random) is.
func TestTicketIDFormat(t *testing.T) {
	for _, seq := range []int64{1, 35, 36, 1295, 1 << 20, 1<<62 - 1} {
		var random [16]byte
		for i := range random {
			random[i] = byte(int(seq) + i*37)
		}
		tk := NewTicket(seq, random, 0, "")
		want := strconv.FormatInt(seq, 36) + "." + b64.EncodeToString(random[:])
		if got := tk.ID(); got != want || !idPattern.MatchString(got) {
			t.Errorf("id of seq %d = %q; want %q", seq, got, want)
		}
	}
}

// A ticket's check allocates only its base64 decode.
func TestTicketAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation budgets are checked without -race (make test runs them so)")
	}
	c := NewCodec([]byte("secret"))
	enc := c.Sign("ev", NewTicket(42, [16]byte{}, 1, "").WithJoinETA(1500)).String()
	if n := testing.AllocsPerRun(100, func() {
		if _, err := c.Parse("ev", enc); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("Parse allocates %v times; want at most 1 (the base64 decode)", n)
	}
}

// What Sign writes, Parse reads back whole, for that event only.
func TestTicketRoundTrip(t *testing.T) {
	c := NewCodec([]byte("secret"))
	for _, tc := range []struct {
		name    string
		ticket  Ticket
		eta     int64
		hasETA  bool
		account string
	}{
		{name: "no ETA, no account", ticket: NewTicket(7, [16]byte{1, 2, 3}, 1_700_000_000_000, "")},
		{name: "an ETA of zero", ticket: NewTicket(8, [16]byte{4}, 1, "").WithJoinETA(0), hasETA: true},
		{name: "an ETA and an account", ticket: NewTicket(1<<40, [16]byte{9}, 2, "acct-1").WithJoinETA(61_000), eta: 61_000, hasETA: true, account: "acct-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signed := c.Sign("ev", tc.ticket)
			got, err := c.Parse("ev", signed.String())
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got != signed {
				t.Errorf("Parse = %+v; want %+v", got, signed)
			}
			if eta, ok := got.JoinETA(); eta != tc.eta && ok || ok != tc.hasETA {
				t.Errorf("JoinETA = %d, %v; want %d, %v", eta, ok, tc.eta, tc.hasETA)
			}
			if got.Account() != tc.account {
				t.Errorf("Account = %q; want %q", got.Account(), tc.account)
			}
			if _, err := c.Parse("other", signed.String()); !errors.Is(err, ErrInvalidTicket) {
				t.Errorf("Parse for another event: %v; want ErrInvalidTicket", err)
			}
			if _, err := NewCodec([]byte("another secret")).Parse("ev", signed.String()); !errors.Is(err, ErrInvalidTicket) {
				t.Errorf("Parse with another secret: %v; want ErrInvalidTicket", err)
			}
		})
	}
}

package queue

import (
	"strconv"
	"testing"
)

// id builds in one buffer what base36(seq) "." base64url(random) is.
func TestTicketIDFormat(t *testing.T) {
	for _, seq := range []int64{1, 35, 36, 1295, 1 << 20, 1<<62 - 1} {
		tk := ticket{seq: seq}
		for i := range tk.random {
			tk.random[i] = byte(int(seq) + i*37)
		}
		want := strconv.FormatInt(seq, 36) + "." + b64.EncodeToString(tk.random[:])
		if got := tk.id(); got != want || !idPattern.MatchString(got) {
			t.Errorf("id of seq %d = %q; want %q", seq, got, want)
		}
	}
}

// A ticket's check allocates only its base64 decode.
func TestTicketAllocations(t *testing.T) {
	if RaceEnabled {
		t.Skip("allocation budgets are checked without -race (make test runs them so)")
	}
	s := NewStore(nil, []byte("secret"))
	tk := ticket{seq: 42, joinedAt: 1}
	enc := s.encode("ev", tk)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := s.decode("ev", enc); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("decode allocates %v times; want at most 1 (the base64 decode)", n)
	}
}

package rehearsal

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ten := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name string
		in   []int
		p    float64
		want int
	}{
		{"empty", nil, 50, 0},
		{"one value", []int{7}, 99, 7},
		{"median of ten", ten, 50, 5},
		{"p90 of ten", ten, 90, 9},
		{"p99 of ten is the max", ten, 99, 10},
		{"p100", ten, 100, 10},
		{"tiny p is the min", ten, 0.01, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.in, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %d; want %d", tt.in, tt.p, got, tt.want)
			}
		})
	}
}

// at is an instant of a scripted rehearsal, in milliseconds after t0.
var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// fan is a first-come-first-served fan that sent its join at join (ms),
// got it answered 10 ms later, was last seen waiting by a poll sent at
// waiting (0 = never) and was admitted at admitted (0 = never).
func fan(join, waiting, admitted int) Fan {
	f := Fan{FIFO: true, Joined: true, JoinSent: at(join), JoinedAt: at(join + 10)}
	if waiting > 0 {
		f.LastWaiting = at(waiting)
	}
	if admitted > 0 {
		f.Admitted, f.AdmittedAt = true, at(admitted)
	}
	return f
}

func TestFIFOInversionsSeenByFans(t *testing.T) {
	lottery := func(f Fan) Fan { f.FIFO = false; return f }
	tests := []struct {
		name        string
		fans        []Fan
		compared    int
		inversions  int
		description string
	}{
		{"in order", []Fan{fan(0, 900, 1000), fan(100, 1900, 2000), fan(200, 2900, 3000)}, 3, 0,
			"each let in after the one before"},
		{"one tick lets in two", []Fan{fan(0, 900, 1000), fan(100, 900, 1005)}, 2, 0,
			"the later fan sees it first, but the earlier was not seen waiting after"},
		{"passed over", []Fan{fan(0, 2500, 3000), fan(100, 900, 1000)}, 2, 1,
			"the second fan in at 1000, the first still waiting at 2500"},
		{"passed over by many counts once", []Fan{fan(0, 5000, 6000), fan(100, 0, 1000), fan(200, 0, 2000), fan(300, 0, 3000)}, 1, 1,
			"the first fan waits while three who came after are let in"},
		{"reversed", []Fan{fan(0, 2900, 3000), fan(100, 1900, 2000), fan(200, 0, 1000)}, 2, 2,
			"the line let in last in, first out"},
		{"joins that overlap are not ordered", []Fan{fan(0, 2500, 3000), fan(5, 900, 1000)}, 2, 0,
			"the second join was sent before the first was answered: either may be ahead"},
		{"a poll sent before the other's admission proves nothing", []Fan{fan(0, 995, 3000), fan(100, 0, 1000)}, 1, 0,
			"the first fan's last 'waiting' was sent at 995, before the other's admitted answer"},
		{"lottery entries are not first come first served", []Fan{lottery(fan(0, 2500, 3000)), fan(100, 900, 1000)}, 1, 0,
			"a pre-queue fan's order is the draw's"},
		{"never admitted, still passed over", []Fan{fan(0, 2500, 0), fan(100, 0, 1000)}, 1, 1,
			"the first fan never got in at all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FansSeen(tt.fans).FIFO
			if got.Compared != tt.compared || got.Inversions != tt.inversions {
				t.Errorf("%s: compared %d, inversions %d; want %d, %d", tt.description, got.Compared, got.Inversions, tt.compared, tt.inversions)
			}
		})
	}
}

func TestFansSeen(t *testing.T) {
	eta := 5 * time.Second
	fans := []Fan{
		{Outcome: Bought, Joined: true, Admitted: true, Wait: 4 * time.Second, ETA: &eta, Seats: 2},
		{Outcome: Passed, Joined: true, Admitted: true, Wait: 8 * time.Second, ETA: &eta},
		{Outcome: Unfinished, Joined: true},
		{Outcome: Failed, Note: "join: 400"},
	}
	s := FansSeen(fans)
	if s.Fans != 4 || s.Joined != 3 || s.Admitted != 2 || s.Bought != 1 || s.Seats != 2 {
		t.Errorf("fans %d joined %d admitted %d bought %d seats %d; want 4 3 2 1 2", s.Fans, s.Joined, s.Admitted, s.Bought, s.Seats)
	}
	if s.Outcomes[Passed] != 1 || s.Outcomes[Unfinished] != 1 || s.Notes["join: 400"] != 1 {
		t.Errorf("outcomes %v notes %v", s.Outcomes, s.Notes)
	}
	if len(s.ETAErrors) != 2 || s.ETAErrors[0] != -1 || s.ETAErrors[1] != 3 {
		t.Errorf("ETA errors %v; want [-1 3]", s.ETAErrors)
	}
}

// The rate is read over the intervals with fans waiting at both ends; the
// ones before the line formed and after it ran dry do not count.
func TestAdmissionOf(t *testing.T) {
	s := func(sec float64, admitted, waiting int64) Sample {
		return Sample{At: time.Duration(sec * float64(time.Second)), Admitted: admitted, Waiting: waiting, Configured: 5}
	}
	a := AdmissionOf([]Sample{
		s(0, 0, 0), s(1, 0, 100), s(2, 5, 95), s(3, 10, 90), s(4.5, 17, 83), s(5.5, 100, 0), s(6.5, 100, 0),
	})
	if len(a.Rates) != 6 {
		t.Fatalf("%d rates; want one per interval, 6", len(a.Rates))
	}
	if want := 17.0 / 3.5; math.Abs(a.Mean-want) > 1e-9 || a.Busy != 3500*time.Millisecond || a.Configured != 5 {
		t.Errorf("mean %.3f over %v, configured %v; want %.3f over 3.5s, 5", a.Mean, a.Busy, a.Configured, want)
	}
	if a.LastBusy != 4500*time.Millisecond || len(a.BusyRates) != 3 {
		t.Errorf("last busy %v, %d busy rates; want 4.5s, 3", a.LastBusy, len(a.BusyRates))
	}
	if got := AdmissionOf([]Sample{s(0, 3, 0), s(1, 9, 0)}); got.Mean != 0 || got.Busy != 0 || len(got.Rates) != 1 {
		t.Errorf("nobody waited: %+v; want no mean, one rate", got)
	}
}

// A room that admits 5 fans once a second, sampled every half second,
// reads 0, 10, 0, 10 interval by interval, and 5 over a window of seconds.
func TestRateOver(t *testing.T) {
	var samples []Sample
	for i := 0; i <= 40; i++ {
		samples = append(samples, Sample{At: time.Duration(i) * 500 * time.Millisecond, Admitted: int64(i/2) * 5})
	}
	zigzag := AdmissionOf(samples).Rates
	if zigzag[0].PerSecond != 0 || zigzag[1].PerSecond != 10 {
		t.Fatalf("interval rates %v…; want 0, 10, …", zigzag[:2])
	}
	smooth := RateOver(samples, 5*time.Second)
	if len(smooth) != 40 {
		t.Fatalf("%d points; want one per sample after the first", len(smooth))
	}
	for _, p := range smooth[10:] {
		if p.PerSecond < 4.5 || p.PerSecond > 5.5 {
			t.Errorf("rate over 5 s at %v: %.2f; want 5 ± 0.5", p.At, p.PerSecond)
		}
	}
}

func TestArrivals(t *testing.T) {
	b := Burst(4)
	if b[0] != 0 || b[3] != 750*time.Millisecond {
		t.Errorf("Burst(4) = %v; want 0 … 750ms", b)
	}
	r := Ramp(100, 10*time.Second)
	if r[0] != 0 || r[25] != 5*time.Second || r[99] >= 10*time.Second {
		t.Errorf("Ramp: first %v, 26th %v, last %v; want 0, 5s, under 10s", r[0], r[25], r[99])
	}
	// Rising: the last second brings more fans than the first.
	var first, last int
	for _, d := range r {
		switch {
		case d < time.Second:
			first++
		case d >= 9*time.Second:
			last++
		}
	}
	if first >= last {
		t.Errorf("ramp: %d fans in the first second, %d in the last; want more and more", first, last)
	}
}

func TestIsLoopback(t *testing.T) {
	for url, want := range map[string]bool{
		"http://127.0.0.1:8080":        true,
		"http://127.9.9.9":             true,
		"http://localhost:8080":        true,
		"https://LOCALHOST":            true,
		"http://[::1]:8080":            true,
		"http://10.0.0.5:8080":         false,
		"http://192.0.2.1:8080":        false,
		"https://tickets.example.com":  false,
		"http://localhost.example.com": false,
		"http://[::ffff:10.0.0.1]":     false,
		"::":                           false,
	} {
		if got := IsLoopback(url); got != want {
			t.Errorf("IsLoopback(%q) = %v; want %v", url, got, want)
		}
	}
	if a := SourceAddress(0).String(); a != "127.0.0.2" {
		t.Errorf("first source address %s; want 127.0.0.2", a)
	}
	if a := SourceAddress(254).String(); a != "127.0.1.0" {
		t.Errorf("source address 254 = %s; want 127.0.1.0", a)
	}
	if _, err := NewClient("http://10.0.0.5:8080", ClientOptions{Fans: 100, FansPerAddress: 10}); err != ErrNotLoopback {
		t.Errorf("spreading fans to a remote room: %v; want ErrNotLoopback", err)
	}
}

// The fans let in at their join, and those made to wait.
func TestFansSeenStraightThrough(t *testing.T) {
	s := FansSeen([]Fan{{Joined: true, Straight: true, Admitted: true}, {Joined: true, Admitted: true}, {Joined: true}, {}})
	if s.StraightThrough != 1 || s.Queued != 2 {
		t.Errorf("straight through %d, queued %d; want 1 and 2", s.StraightThrough, s.Queued)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/waitroom/waitroom/internal/plot"
	"github.com/waitroom/waitroom/internal/rehearsal"
)

// summary is what a rehearsal found: printed, written as JSON (-out), and
// plotted (-plot).
type summary struct {
	URL             string    `json:"url"`
	Event           string    `json:"event"`
	Fans            int       `json:"fans"`
	Arrival         string    `json:"arrival"`
	DurationSeconds float64   `json:"durationSeconds"`
	Buy             float64   `json:"buy"`
	StartedAt       time.Time `json:"startedAt"`
	ElapsedSeconds  float64   `json:"elapsedSeconds"`
	Ended           string    `json:"ended"`

	// AdmittedPerSecond is the room's pace while fans were waiting (the
	// line never ran dry between two samples), read off the room's own
	// admitted count, against the rate configured meanwhile. Waited is
	// false when no two samples in a row found fans waiting: then there is
	// no pace to measure, and Configured is the rate configured last seen.
	AdmittedPerSecond struct {
		Waited      bool    `json:"waited"`
		Mean        float64 `json:"mean"`
		Configured  float64 `json:"configured"`
		BusySeconds float64 `json:"busySeconds"`
	} `json:"admittedPerSecond"`

	Seen struct {
		Joined int `json:"joined"`
		// StraightThrough of them were let in at their join (an auto
		// event with room), Queued made to wait.
		StraightThrough int            `json:"straightThrough"`
		Queued          int            `json:"queued"`
		Admitted        int            `json:"admitted"`
		Bought          int            `json:"bought"`
		Seats           int            `json:"seats"`
		Outcomes        map[string]int `json:"outcomes"`
		Notes           map[string]int `json:"failures,omitempty"`
	} `json:"seen"` // what the fans saw
	WaitSeconds     spread `json:"waitSeconds"`     // join answered → first "admitted"
	ETAErrorSeconds spread `json:"etaErrorSeconds"` // that wait − etaSeconds told at join
	FIFO            struct {
		Compared   int `json:"compared"`
		Inversions int `json:"inversions"`
	} `json:"fifo"`

	Answers struct {
		Requests        int64            `json:"requests"`
		PerSecond       float64          `json:"perSecond"`
		ByStatus        map[string]int64 `json:"byStatus"`
		Status4xx       int64            `json:"4xx"`
		Status5xx       int64            `json:"5xx"`
		TransportErrors int64            `json:"transportErrors"`
	} `json:"answers"`

	// Room is the sale's own report (GET /api/v1/events/{event}/report):
	// joined and admitted during the rehearsal (after less before), the
	// rate and FIFO inversions over the whole sale so far.
	Room *roomFigures `json:"room"`

	Samples  []sampleJSON `json:"samples"`
	Problems []string     `json:"problems"`
	OK       bool         `json:"ok"`

	samples []rehearsal.Sample // for the plot
	// straight are the joins let straight through, counted at each
	// sample's instant (for the plot).
	straight []rehearsal.Sample
}

type spread struct {
	Count int      `json:"count"`
	P50   *float64 `json:"p50"`
	P95   *float64 `json:"p95"`
}

type roomFigures struct {
	Joined              int64   `json:"joined"`
	Admitted            int64   `json:"admitted"`
	StraightThrough     int64   `json:"straightThrough"`
	AdmittedPerSecond   float64 `json:"admittedPerSecond"`
	ConfiguredPerSecond float64 `json:"configuredPerSecond"`
	FIFOInversions      int64   `json:"fifoInversions"`
	RankInversions      int64   `json:"rankInversions"`
}

type sampleJSON struct {
	At         float64 `json:"at"` // seconds since the start
	Admitted   int64   `json:"admitted"`
	Waiting    int64   `json:"waiting"`
	Active     int64   `json:"active"`
	Configured float64 `json:"configured"`
	State      string  `json:"state,omitempty"`
	// StraightThrough is how many fans had been let in at their join by
	// then (their join's answer), as the plot draws it.
	StraightThrough int64 `json:"straightThrough"`
}

func summarize(o options, ev rehearsal.EventInfo, ended string, start time.Time, elapsed time.Duration, fans []rehearsal.Fan,
	samples []rehearsal.Sample, answers rehearsal.Counts, before, after rehearsal.Report, haveAfter bool) *summary {
	s := &summary{
		URL: o.url, Event: o.event, Fans: o.fans, Arrival: o.arrival, DurationSeconds: o.duration.Seconds(), Buy: o.buy,
		StartedAt: start.UTC(), ElapsedSeconds: round(elapsed.Seconds(), 1), Ended: ended, samples: samples,
	}
	adm := rehearsal.AdmissionOf(samples)
	a := &s.AdmittedPerSecond
	a.Waited, a.BusySeconds = adm.Busy > 0, round(adm.Busy.Seconds(), 1)
	if a.Waited {
		a.Mean, a.Configured = round(adm.Mean, 2), round(adm.Configured, 2)
	} else if len(samples) > 0 {
		a.Configured = round(samples[len(samples)-1].Configured, 2)
	} else {
		a.Configured = ev.AdmitPerSecond
	}

	seen := rehearsal.FansSeen(fans)
	s.Seen.Joined, s.Seen.Admitted, s.Seen.Bought, s.Seen.Seats = seen.Joined, seen.Admitted, seen.Bought, seen.Seats
	s.Seen.StraightThrough, s.Seen.Queued = seen.StraightThrough, seen.Queued
	s.straight = straightAt(fans, samples, start)
	s.Seen.Outcomes = map[string]int{}
	for o, n := range seen.Outcomes {
		if n > 0 {
			s.Seen.Outcomes[rehearsal.Outcome(o).String()] = n
		}
	}
	if len(seen.Notes) > 0 {
		s.Seen.Notes = seen.Notes
	}
	waits := make([]float64, len(seen.Waits))
	for i, w := range seen.Waits {
		waits[i] = w.Seconds()
	}
	s.WaitSeconds, s.ETAErrorSeconds = spreadOf(waits), spreadOf(seen.ETAErrors)
	s.FIFO.Compared, s.FIFO.Inversions = seen.FIFO.Compared, seen.FIFO.Inversions

	s.Answers.Requests, s.Answers.TransportErrors = answers.Requests, answers.TransportErrors
	s.Answers.PerSecond = round(float64(answers.Requests)/math.Max(elapsed.Seconds(), 1e-3), 0)
	s.Answers.ByStatus = map[string]int64{}
	for code, n := range answers.ByStatus {
		s.Answers.ByStatus[strconv.Itoa(code)] = n
	}
	s.Answers.Status4xx, s.Answers.Status5xx = answers.Class(4), answers.Class(5)

	if haveAfter {
		s.Room = &roomFigures{
			Joined: after.Joined - before.Joined, Admitted: after.Admitted - before.Admitted,
			StraightThrough:   after.StraightThrough - before.StraightThrough,
			AdmittedPerSecond: after.AdmittedPerSecond.Mean, ConfiguredPerSecond: after.AdmittedPerSecond.Configured,
			FIFOInversions: after.FIFOInversions, RankInversions: after.RankInversions,
		}
	}
	for i, smp := range samples {
		s.Samples = append(s.Samples, sampleJSON{At: round(smp.At.Seconds(), 3), Admitted: smp.Admitted, Waiting: smp.Waiting,
			Active: smp.Active, Configured: smp.Configured, State: smp.State, StraightThrough: s.straight[i].Admitted})
	}

	s.Problems = []string{}
	if n := s.Answers.Status5xx; n > 0 {
		var codes []string
		for _, c := range slices.Sorted(maps.Keys(answers.ByStatus)) {
			if c >= 500 {
				codes = append(codes, fmt.Sprintf("%s × %s", count(answers.ByStatus[c]), statusText(c)))
			}
		}
		s.Problems = append(s.Problems, fmt.Sprintf("the room answered %s requests with a 5xx (%s)", count(n), strings.Join(codes, ", ")))
	}
	if n := s.FIFO.Inversions; n > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%s fans were passed over by a fan who joined after them (FIFO inversions)", count(int64(n))))
	}
	if r := s.Room; r != nil && r.RankInversions > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("the room let %s fans of the pre-queue in after someone drawn behind them (rank inversions)", count(r.RankInversions)))
	}
	s.OK = len(s.Problems) == 0
	return s
}

// straightAt counts the fans let straight through by each sample's
// instant (their join's answer), as samples of a count the plot can rate.
func straightAt(fans []rehearsal.Fan, samples []rehearsal.Sample, start time.Time) []rehearsal.Sample {
	var at []time.Duration
	for _, f := range fans {
		if f.Straight {
			at = append(at, f.JoinedAt.Sub(start))
		}
	}
	slices.Sort(at)
	out := make([]rehearsal.Sample, len(samples))
	n := 0
	for i, smp := range samples {
		for n < len(at) && at[n] <= smp.At {
			n++
		}
		out[i] = rehearsal.Sample{At: smp.At, Admitted: int64(n)}
	}
	return out
}

func spreadOf(sorted []float64) spread {
	out := spread{Count: len(sorted)}
	if len(sorted) > 0 {
		p50, p95 := round(rehearsal.Percentile(sorted, 50), 1), round(rehearsal.Percentile(sorted, 95), 1)
		out.P50, out.P95 = &p50, &p95
	}
	return out
}

func round(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}

var printer = message.NewPrinter(language.English)

// count is n with thousands separators: 12,345.
func count(n int64) string { return printer.Sprintf("%d", n) }

// rate is a rate per second as the room's event route shows it (two
// decimals at most).
func rate(r float64) string { return strconv.FormatFloat(round(r, 2), 'f', -1, 64) }

func (sp spread) text(what string) string {
	if sp.P50 == nil {
		return "not measured (nobody was let in)"
	}
	return fmt.Sprintf("p50 %s s · p95 %s s (%s %s)", strconv.FormatFloat(*sp.P50, 'f', 1, 64), strconv.FormatFloat(*sp.P95, 'f', 1, 64), count(int64(sp.Count)), what)
}

// print writes the summary for a person.
func (s *summary) print(w io.Writer) {
	p := func(label, format string, a ...any) { fmt.Fprintf(w, "%-12s %s\n", label, fmt.Sprintf(format, a...)) }
	fmt.Fprintf(w, "\nrehearsal of %s at %s: %s fans, %s arrival, %.1f s (%s)\n", s.Event, s.URL, count(int64(s.Fans)), s.Arrival, s.ElapsedSeconds, s.Ended)
	p("fans", "joined %s · admitted %s · bought %s (%s seats) · %s", count(int64(s.Seen.Joined)), count(int64(s.Seen.Admitted)),
		count(int64(s.Seen.Bought)), count(int64(s.Seen.Seats)), s.outcomes())
	p("joins", "%s let straight through · %s made to wait in line", count(int64(s.Seen.StraightThrough)), count(int64(s.Seen.Queued)))
	a := s.AdmittedPerSecond
	if a.Waited {
		p("admitted/s", "%s while fans waited (%.1f s), configured %s", rate(a.Mean), a.BusySeconds, rate(a.Configured))
	} else {
		p("admitted/s", "nobody waited long enough to measure a pace: fans were let in as they came (configured %s)", rate(a.Configured))
	}
	p("wait", "%s", s.WaitSeconds.text("fans let in; from the join's answer to the first \"admitted\""))
	p("ETA error", "%s", s.ETAErrorSeconds.text("fans; the real wait less the ETA told at join"))
	var codes []string
	for _, c := range slices.Sorted(maps.Keys(s.Answers.ByStatus)) {
		if c >= "400" {
			codes = append(codes, c+" × "+count(s.Answers.ByStatus[c]))
		}
	}
	if len(codes) == 0 {
		codes = []string{"none"}
	}
	p("answers", "%s requests, %s/s · 4xx %s · 5xx %s · transport errors %s · by status ≥ 400: %s", count(s.Answers.Requests),
		count(int64(s.Answers.PerSecond)), count(s.Answers.Status4xx), count(s.Answers.Status5xx), count(s.Answers.TransportErrors), strings.Join(codes, ", "))
	p("FIFO", "%s inversions seen by the fans (%s fans checked)", count(int64(s.FIFO.Inversions)), count(int64(s.FIFO.Compared)))
	if r := s.Room; r != nil {
		p("the room", "its report: %s joined and %s admitted (%s straight through) during the rehearsal · %s per second while fans waited (configured %s) · %s FIFO inversions and %s rank inversions in the whole sale",
			count(r.Joined), count(r.Admitted), count(r.StraightThrough), rate(r.AdmittedPerSecond), rate(r.ConfiguredPerSecond), count(r.FIFOInversions), count(r.RankInversions))
		if more := r.Admitted - int64(s.Seen.Admitted); more > 0 && s.Ended != "every fan was done" {
			p("", "(%s of them let in as the rehearsal ended, before their fans polled again)", count(more))
		}
	}
	if s.OK {
		p("result", "OK: no 5xx, no FIFO inversion, no rank inversion")
		return
	}
	for _, pr := range s.Problems {
		p("PROBLEM", "%s", pr)
	}
}

func (s *summary) outcomes() string {
	var parts []string
	for o := range rehearsal.Outcomes {
		if o == rehearsal.Bought {
			continue
		}
		if n := s.Seen.Outcomes[o.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", o, count(int64(n))))
		}
	}
	if len(parts) == 0 {
		return "nobody else"
	}
	return strings.Join(parts, " · ")
}

func (s *summary) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// plotWindow is what the plotted rate is averaged over: a few admitter
// ticks (1 s by default), so that samples between ticks do not zigzag.
const plotWindow = 5 * time.Second

// drawSVG plots admitted per second against the rate configured, and
// below it the line and those inside, over the rehearsal.
func (s *summary) drawSVG(w io.Writer) error {
	var configured, admitted, waiting, active []plot.Point
	for _, smp := range s.samples {
		x := smp.At.Seconds()
		configured = append(configured, plot.Point{X: x, Y: smp.Configured})
		waiting = append(waiting, plot.Point{X: x, Y: float64(smp.Waiting)})
		active = append(active, plot.Point{X: x, Y: float64(smp.Active)})
	}
	for _, r := range rehearsal.RateOver(s.samples, plotWindow) {
		admitted = append(admitted, plot.Point{X: r.At.Seconds(), Y: r.PerSecond})
	}
	var straight []plot.Point
	if s.Seen.StraightThrough > 0 {
		for _, r := range rehearsal.RateOver(s.straight, plotWindow) {
			straight = append(straight, plot.Point{X: r.At.Seconds(), Y: r.PerSecond})
		}
	}
	rates := []plot.Series{
		{Name: "configured", Points: configured, Color: plot.Red, Dashed: true},
		{Name: "admitted per second (the room's count, over the last 5 s)", Points: admitted, Color: plot.Blue},
	}
	if len(straight) > 0 {
		// An auto event: how many of them were let in at their join.
		rates = append(rates, plot.Series{Name: "of them straight through", Points: straight, Color: plot.Green})
	}
	title := fmt.Sprintf("%s: admitted per second against the configured rate", s.Event)
	return plot.SVG(w, 900, 320,
		plot.Panel{Title: title, XLabel: "seconds since the rehearsal began", YLabel: "fans per second", Lines: rates},
		plot.Panel{Title: s.Event + ": the line", XLabel: "seconds since the rehearsal began", YLabel: "fans", Lines: []plot.Series{
			{Name: "waiting", Points: waiting, Color: plot.Green},
			{Name: "inside (active)", Points: active, Color: plot.Blue, Dashed: true},
		}},
	)
}

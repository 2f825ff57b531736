package rehearsal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Sample is the line at one instant of a rehearsal.
type Sample struct {
	At         time.Duration // since the start
	Admitted   int64         // fans the room ever admitted (its own count)
	Waiting    int64         // fans in line
	Active     int64         // fans inside
	Configured float64       // the admission rate configured, per second
	State      string        // the event's state ("" when the sampler cannot tell)
}

// A Sampler reads the line once; it stamps the sample with the instant
// it was read, after start.
type Sampler interface {
	Sample(ctx context.Context, start time.Time) (Sample, error)
}

// Watch samples the line every interval until ctx ends, keeping the
// samples that could be read. A sampler that falls behind (a crowded
// machine) just samples less often: each sample carries its own instant.
func Watch(ctx context.Context, s Sampler, every time.Duration, start time.Time) []Sample {
	var out []Sample
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if smp, err := s.Sample(context.WithoutCancel(ctx), start); err == nil {
			out = append(out, smp)
		}
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// RoomSampler reads the line through the room's public API: the event's
// route (the line, those inside, the rate in force, the state) and the
// sale's report (fans admitted). With the operators' token it reads the
// operators' list of events instead, one request that also gives the rate
// configured before the adaptive admitter's factor.
type RoomSampler struct {
	Client     *Client
	Event      string
	AdminToken string
}

// ErrUnknownEvent is the room's 404 for the event.
var ErrUnknownEvent = errors.New("rehearsal: the room has no such event")

// EventInfo is the public event route's answer (DESIGN.md "Gateway API").
type EventInfo struct {
	ID             string     `json:"id"`
	Name           string     `json:"name"`
	State          string     `json:"state"`
	Waiting        int64      `json:"waiting"`
	Active         int64      `json:"active"`
	MaxActive      int64      `json:"maxActive"`
	AdmitPerSecond float64    `json:"admitPerSecond"`
	OpensAt        *time.Time `json:"opensAt"`
	Showtimes      []struct {
		ID       int64     `json:"id"`
		Title    string    `json:"title"`
		StartsAt time.Time `json:"startsAt"`
	} `json:"showtimes"`
}

// Event reads the event's public route.
func (c *Client) Event(ctx context.Context, event string) (EventInfo, error) {
	var out EventInfo
	return out, c.getJSON(ctx, "/api/v1/events/"+event, "", &out)
}

// Report is the sale's own report (DESIGN.md "Transparency"), the figures
// a rehearsal compares with its fans'.
type Report struct {
	Joined            int64 `json:"joined"`
	Admitted          int64 `json:"admitted"`
	StraightThrough   int64 `json:"straightThrough"` // of Admitted, let in at their join (an auto event with room)
	Left              int64 `json:"left"`
	Abandoned         int64 `json:"abandoned"`
	AdmittedPerSecond struct {
		Mean       float64 `json:"mean"`
		Configured float64 `json:"configured"`
	} `json:"admittedPerSecond"`
	FIFOInversions int64 `json:"fifoInversions"`
	RankInversions int64 `json:"rankInversions"` // pre-queue entries let in out of the draw's order
	WaitSeconds    struct {
		P50   *float64 `json:"p50"`
		P95   *float64 `json:"p95"`
		Count int64    `json:"count"`
	} `json:"waitSeconds"`
	ETAErrorSeconds struct {
		P50   *float64 `json:"p50"`
		P95   *float64 `json:"p95"`
		Count int64    `json:"count"`
	} `json:"etaErrorSeconds"`
	SoldOutAt *time.Time `json:"soldOutAt"`
}

// Report reads the sale's report.
func (c *Client) Report(ctx context.Context, event string) (Report, error) {
	var out Report
	return out, c.getJSON(ctx, "/api/v1/events/"+event+"/report", "", &out)
}

// AdminEvent is an event as the operators' list shows it.
type AdminEvent struct {
	ID         string  `json:"id"`
	State      string  `json:"state"`
	Waiting    int64   `json:"waiting"`
	Active     int64   `json:"active"`
	Admitted   int64   `json:"admitted"`
	Rate       float64 `json:"admitPerSecond"`
	Configured float64 `json:"configuredAdmitPerSecond"`
}

// AdminEvent reads the event off the operators' list of events.
func (c *Client) AdminEvent(ctx context.Context, event, token string) (AdminEvent, error) {
	var list struct {
		Events []AdminEvent `json:"events"`
	}
	if err := c.getJSON(ctx, "/api/v1/admin/events", token, &list); err != nil {
		return AdminEvent{}, err
	}
	i := slices.IndexFunc(list.Events, func(e AdminEvent) bool { return e.ID == event })
	if i < 0 {
		return AdminEvent{}, ErrUnknownEvent
	}
	return list.Events[i], nil
}

func (c *Client) getJSON(ctx context.Context, path, token string, v any) error {
	a, err := c.Do(ctx, -1, Request{Method: http.MethodGet, Path: path, Token: token})
	switch {
	case err != nil:
		return err
	case a.Status == http.StatusNotFound && a.Error() == "unknown_event":
		return ErrUnknownEvent
	case a.Status != http.StatusOK:
		return fmt.Errorf("GET %s: %d %s", path, a.Status, a.Body)
	}
	if err := json.Unmarshal(a.Body, v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// Sample reads the line once, stamped at the middle of its request(s).
func (s RoomSampler) Sample(ctx context.Context, start time.Time) (Sample, error) {
	t0 := time.Now()
	var out Sample
	if s.AdminToken != "" {
		e, err := s.Client.AdminEvent(ctx, s.Event, s.AdminToken)
		if err != nil {
			return Sample{}, err
		}
		out = Sample{Admitted: e.Admitted, Waiting: e.Waiting, Active: e.Active, Configured: e.Configured, State: e.State}
	} else {
		e, err := s.Client.Event(ctx, s.Event)
		if err != nil {
			return Sample{}, err
		}
		r, err := s.Client.Report(ctx, s.Event)
		if err != nil {
			return Sample{}, err
		}
		out = Sample{Admitted: r.Admitted, Waiting: e.Waiting, Active: e.Active, Configured: e.AdmitPerSecond, State: e.State}
	}
	t1 := time.Now()
	out.At = t0.Add(t1.Sub(t0) / 2).Sub(start)
	return out, nil
}

// Admission is the pace of the line, read off its samples.
type Admission struct {
	// Rates is each interval's admitted per second, at the interval's end.
	Rates []RatePoint
	// Mean is the fans admitted per second over the intervals with fans
	// waiting at both ends (the line never ran dry in between), and
	// Configured the rate configured over the same intervals; Busy is
	// their total length and BusyRates their rates, sorted.
	Mean, Configured float64
	Busy             time.Duration
	BusyRates        []float64
	// LastBusy is the end of the last such interval: when the line ran dry
	// for the last time.
	LastBusy time.Duration
}

// RatePoint is one interval's rate.
type RatePoint struct {
	At        time.Duration
	PerSecond float64
}

// AdmissionOf reads the rate off samples, in their order.
func AdmissionOf(samples []Sample) Admission {
	var (
		out      Admission
		admitted int64
		conf     float64
	)
	for i := 1; i < len(samples); i++ {
		prev, smp := samples[i-1], samples[i]
		dt := smp.At - prev.At
		if dt <= 0 {
			continue
		}
		r := float64(smp.Admitted-prev.Admitted) / dt.Seconds()
		out.Rates = append(out.Rates, RatePoint{At: smp.At, PerSecond: r})
		if prev.Waiting > 0 && smp.Waiting > 0 {
			out.BusyRates = append(out.BusyRates, r)
			admitted += smp.Admitted - prev.Admitted
			conf += prev.Configured * dt.Seconds()
			out.Busy += dt
			out.LastBusy = smp.At
		}
	}
	slices.Sort(out.BusyRates)
	if out.Busy > 0 {
		out.Mean = float64(admitted) / out.Busy.Seconds()
		out.Configured = conf / out.Busy.Seconds()
	}
	return out
}

// RateOver is the admitted rate at each sample over the window before it
// (from the earliest sample within it): a moving average, which a plot
// needs when the room admits once per tick and samples fall between
// ticks (a tick of 1 s sampled every 500 ms reads 0, 10, 0, 10 a second
// for a steady 5).
func RateOver(samples []Sample, window time.Duration) []RatePoint {
	var out []RatePoint
	j := 0
	for i := 1; i < len(samples); i++ {
		for j < i-1 && samples[i].At-samples[j+1].At >= window {
			j++
		}
		from, to := samples[j], samples[i]
		if dt := to.At - from.At; dt > 0 {
			out = append(out, RatePoint{At: to.At, PerSecond: float64(to.Admitted-from.Admitted) / dt.Seconds()})
		}
	}
	return out
}

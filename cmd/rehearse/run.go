package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/waitroom/waitroom/internal/rehearsal"
)

// run rehearses the sale: the fans, the line sampled as they go, then the
// summary, its JSON and its plot. It answers errProblems when the fans saw
// a 5xx or a FIFO inversion, another error when it could not rehearse.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	perAddress := 0
	if rehearsal.IsLoopback(o.url) {
		perAddress = o.fansPerAddress
	}
	client, err := rehearsal.NewClient(o.url, rehearsal.ClientOptions{Fans: o.fans, FansPerAddress: perAddress, Span: o.duration + 10*time.Minute})
	if errors.Is(err, rehearsal.ErrNotLoopback) {
		// [::1]: one loopback address only, so the fans share it.
		fmt.Fprintln(stderr, "rehearse: every fan joins from this machine's one address: the room's joins_per_ip_per_minute counts them together")
		client, err = rehearsal.NewClient(o.url, rehearsal.ClientOptions{Fans: o.fans, Span: o.duration + 10*time.Minute})
	}
	if err != nil {
		return err
	}
	defer client.Close()

	event, err := client.Event(ctx, o.event)
	switch {
	case errors.Is(err, rehearsal.ErrUnknownEvent):
		return fmt.Errorf("%s has no event %q", o.url, o.event)
	case err != nil:
		return fmt.Errorf("the room at %s: %w", o.url, err)
	}
	var sampler rehearsal.Sampler = rehearsal.RoomSampler{Client: client, Event: o.event}
	if o.adminToken != "" {
		if _, err := client.AdminEvent(ctx, o.event, o.adminToken); err != nil {
			return fmt.Errorf("the operators' API with -admin-token: %w", err)
		}
		sampler = rehearsal.RoomSampler{Client: client, Event: o.event, AdminToken: o.adminToken}
	}
	before, err := client.Report(ctx, o.event)
	if err != nil {
		return fmt.Errorf("the sale's report: %w", err)
	}
	// Buyers book the showtimes still to come (all of them if none is).
	var showtimes, all []int64
	for _, st := range event.Showtimes {
		all = append(all, st.ID)
		if st.StartsAt.After(time.Now()) {
			showtimes = append(showtimes, st.ID)
		}
	}
	if len(showtimes) == 0 {
		showtimes = all
	}
	fmt.Fprintf(stderr, "rehearsing %s (%s, %s) at %s: %s fans, %s arrival, at most %v\n",
		o.event, event.Name, event.State, client.Base(), count(int64(o.fans)), o.arrival, o.duration)

	live := &rehearsal.Live{}
	start := time.Now()
	sampleCtx, stopSampling := context.WithCancel(context.WithoutCancel(ctx))
	samplesCh := make(chan []rehearsal.Sample, 1)
	go func() { samplesCh <- rehearsal.Watch(sampleCtx, sampler, o.sampleEvery, start) }()
	progressCtx, stopProgress := context.WithCancel(ctx)
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(progressCtx, stderr, isTerminal(stderr), live, client, o.fans, start)
	}()

	fansCtx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	fans := rehearsal.Run(fansCtx, client, rehearsal.Plan{
		Event: o.event, Arrivals: o.arrivals(), Seed: uint64(start.UnixNano()), Live: live,
		Behaviour: rehearsal.Behaviour{Buy: o.buy, PressPay: true, Showtimes: showtimes},
	}, start)
	ended := "every fan was done"
	switch {
	case ctx.Err() != nil:
		ended = "interrupted"
	case fansCtx.Err() != nil:
		ended = "-duration ran out"
	}
	elapsed := time.Since(start)
	time.Sleep(o.settleAfterFans) // the line after the last fan: admissions still on their way
	stopSampling()
	samples := <-samplesCh
	stopProgress()
	<-progressDone

	reportCtx, cancelReport := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelReport()
	after, err := client.Report(reportCtx, o.event)
	if err != nil {
		fmt.Fprintf(stderr, "rehearse: the sale's report after the rehearsal: %v\n", err)
	}
	sum := summarize(o, event, ended, start, elapsed, fans, samples, client.Counts(), before, after, err == nil)
	sum.print(stdout)
	if o.out != "" {
		if err := writeFile(o.out, sum.writeJSON); err != nil {
			return err
		}
	}
	if o.plot != "" {
		if err := writeFile(o.plot, sum.drawSVG); err != nil {
			return err
		}
	}
	if !sum.OK {
		return errProblems
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// progress shows the fans as they go until ctx ends: on a terminal, one
// line rewritten in place twice a second; elsewhere (a log, a pipe), one
// line every ten seconds.
func progress(ctx context.Context, w io.Writer, tty bool, live *rehearsal.Live, c *rehearsal.Client, fans int, start time.Time) {
	every := 10 * time.Second
	if tty {
		every = 500 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	lastAt, lastRequests := start, int64(0)
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprint(w, "\n")
			}
			return
		case now := <-tick.C:
			n := c.Counts()
			rps := float64(n.Requests-lastRequests) / now.Sub(lastAt).Seconds()
			lastAt, lastRequests = now, n.Requests
			errs := n.Class(5) + n.TransportErrors + live.Failed.Load()
			line := fmt.Sprintf("%s  joined %s/%s · waiting %s · admitted %s · bought %s · errors %s · %s req/s",
				clock(now.Sub(start)), count(live.Joined.Load()), count(int64(fans)), count(live.Waiting.Load()),
				count(live.Admitted.Load()), count(live.Bought.Load()), count(errs), count(int64(rps)))
			if tty {
				fmt.Fprintf(w, "\r%s\x1b[K", line)
			} else {
				fmt.Fprintln(w, line)
			}
		}
	}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// clock is d as m:ss.
func clock(d time.Duration) string {
	s := int(d / time.Second)
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// statusText is "404 Not Found".
func statusText(code int) string { return fmt.Sprintf("%d %s", code, http.StatusText(code)) }

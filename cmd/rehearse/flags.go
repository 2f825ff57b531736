package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/waitroom/waitroom/internal/rehearsal"
)

// options are the command line's.
type options struct {
	url, event      string
	fans            int
	arrival         string // burst | ramp
	duration        time.Duration
	buy             float64
	adminToken      string
	out, plot       string
	ownRoom         bool
	fansPerAddress  int // a loopback room's fans per source address (rehearsal.Client)
	sampleEvery     time.Duration
	settleAfterFans time.Duration // the line is sampled this long after the last fan
	maxFans         int
}

var (
	// errUsage: the flags were wrong, and the flag set said so already.
	errUsage = errors.New("usage")
	// errProblems: the rehearsal ran and found what must not happen.
	errProblems = errors.New("the rehearsal found problems")
)

// errNotLoopback refuses a room that is not on this machine.
func errNotLoopback(u string) error {
	return fmt.Errorf("%s is not on this machine (loopback): rehearsing sends it thousands of simulated fans, "+
		"and books and pays for real seats in it. If it is your room, say so with -i-own-this-room", u)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{fansPerAddress: 16, sampleEvery: 500 * time.Millisecond, settleAfterFans: 1500 * time.Millisecond, maxFans: 1_000_000}
	fs := flag.NewFlagSet("rehearse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8080", "the room's gateway")
	fs.StringVar(&o.event, "event", "", "the event to rehearse (its id)")
	fs.IntVar(&o.fans, "fans", 1000, "simulated fans")
	fs.StringVar(&o.arrival, "arrival", "burst", "burst: every fan arrives within the first second; ramp: over the first half of -duration, more every second")
	fs.DurationVar(&o.duration, "duration", 2*time.Minute, "the rehearsal's length: fans still waiting or holding then give their place back")
	fs.Float64Var(&o.buy, "buy", 0.5, "the chance that an admitted fan holds a seat and pays (0–1); the others give their place back")
	fs.StringVar(&o.adminToken, "admin-token", os.Getenv("WAITROOM_ADMIN_TOKEN"), "the operators' token, to read the configured rate before the adaptive factor (default $WAITROOM_ADMIN_TOKEN)")
	fs.StringVar(&o.out, "out", "", "write the summary as JSON to this file")
	fs.StringVar(&o.plot, "plot", "", "draw admitted per second against the configured rate, and the line, as SVG to this file")
	fs.BoolVar(&o.ownRoom, "i-own-this-room", false, "rehearse a room that is not on this machine (it is yours)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: rehearse -url http://127.0.0.1:8080 -event premiere -fans 20000 -arrival burst|ramp -duration 2m [-buy 0.5] [-admin-token T] [-out summary.json] [-plot plot.svg] [-i-own-this-room]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, errUsage
	}
	bad := func(format string, a ...any) (options, error) {
		fmt.Fprintf(stderr, "rehearse: "+format+"\n", a...)
		fs.Usage()
		return o, errUsage
	}
	switch u, err := url.Parse(o.url); {
	case fs.NArg() > 0:
		return bad("unexpected arguments %q", fs.Args())
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return bad("-url %q: want the gateway's http(s) URL", o.url)
	case o.event == "":
		return bad("-event: which event? (its id, e.g. premiere)")
	case o.fans < 1 || o.fans > o.maxFans:
		return bad("-fans %d: want 1 to %d", o.fans, o.maxFans)
	case o.arrival != "burst" && o.arrival != "ramp":
		return bad("-arrival %q: want burst or ramp", o.arrival)
	case o.duration <= 0:
		return bad("-duration %v: want a positive duration (2m)", o.duration)
	case !(o.buy >= 0 && o.buy <= 1):
		return bad("-buy %v: want 0 to 1", o.buy)
	}
	o.url = strings.TrimSuffix(o.url, "/")
	if !o.ownRoom && !rehearsal.IsLoopback(o.url) {
		return o, errNotLoopback(o.url)
	}
	return o, nil
}

// arrivals is each fan's arrival after the start.
func (o options) arrivals() []time.Duration {
	if o.arrival == "ramp" {
		return rehearsal.Ramp(o.fans, o.duration/2)
	}
	return rehearsal.Burst(o.fans)
}

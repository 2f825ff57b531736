// Command rehearse drives a waiting room with simulated fans before its
// sale, through the room's public API alone (DESIGN.md "Rehearsing a
// sale"):
//
//	rehearse -url http://127.0.0.1:8080 -event premiere -fans 20000 \
//	         -arrival burst|ramp -duration 2m [-buy 0.5] [-admin-token T] \
//	         [-out summary.json] [-plot plot.svg] [-i-own-this-room]
//
// Each fan joins (paying the proof of work when asked), polls as told, and
// once admitted holds a seat and pays on the payment provider's hosted page
// with probability -buy, or gives its place back. A live line shows the
// fans as they go; at the end rehearse prints a summary (admitted per
// second against the configured rate, waits, ETA errors, 4xx and 5xx, FIFO
// inversions seen by the fans, and the room's own report beside them),
// writes it as JSON (-out) and plots the rate and the line (-plot, SVG).
//
// Exit status: 0 when the room held; 1 when a fan saw a 5xx or a FIFO
// inversion; 2 when rehearse could not rehearse (bad flags, a room that is
// not on this machine without -i-own-this-room, no such event).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/waitroom/waitroom/internal/platform/service"
)

func main() {
	ctx, stop := service.Interrupted()
	defer stop()
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if err == nil {
		err = run(ctx, opts, os.Stdout, os.Stderr)
	}
	switch {
	case err == nil:
	case errors.Is(err, errProblems):
		os.Exit(1)
	default:
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "rehearse:", err)
		}
		os.Exit(2)
	}
}

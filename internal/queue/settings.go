package queue

import "time"

// Modes of an event (config events[].mode; the config validates the same
// four words).
const (
	ModeQueue       = "queue"       // a line, admitted at the rate, never above the cap
	ModePassthrough = "passthrough" // no line: admitted at once
	ModePaused      = "paused"      // the line holds, nobody is admitted
	ModeClosed      = "closed"      // no joins, waiting tickets are told
)

// Admitting reports whether the settings let anyone in at t: not paused or
// closed, and inside the open window.
func (s Settings) Admitting(t time.Time) bool {
	switch {
	case s.Mode == ModePaused || s.Mode == ModeClosed:
		return false
	case s.OpensAt != nil && t.Before(*s.OpensAt):
		return false
	case s.ClosesAt != nil && !t.Before(*s.ClosesAt):
		return false
	}
	return true
}

package rehearsal

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted,
// which must be in ascending order; the zero value when sorted is empty.
// Nearest rank, not interpolation: every figure reported is a value that
// was really observed.
func Percentile[T cmp.Ordered](sorted []T, p float64) T {
	var zero T
	if len(sorted) == 0 {
		return zero
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// Seen is what the fans saw, all together.
type Seen struct {
	Fans, Joined, Admitted int
	// StraightThrough of the joined were let in at their join; Queued
	// were made to wait (Joined less StraightThrough).
	StraightThrough, Queued int
	Bought, Seats           int
	Outcomes                [Outcomes]int
	Notes                   map[string]int // why fans failed, by kind
	// Waits are the admitted fans' waits (join answer → first admitted
	// answer), and ETAErrors each one's wait less the ETA told at join, in
	// seconds; both sorted.
	Waits     []time.Duration
	ETAErrors []float64
	// FIFO is the check of first come, first served (Inversions).
	FIFO FIFO
}

// FIFO is what the fans saw of the room's order.
//
// A FIFO inversion seen by the fans is a fan A passed over by a fan B
// who joined after it: both places first come, first served (not entries
// of a pre-queue lottery); A's join was answered before B's join was sent,
// so the room must let A in first; and yet a poll of A's sent after B had
// received its "admitted" answer was answered "waiting". The instants are
// this machine's clock, each on the safe side of its request (a join or a
// poll counts from when it was sent, an answer from when it arrived), so
// the network's delays can hide an inversion but never make one up. Each
// fan passed over counts once, as the room's report counts each fan let in
// out of order.
type FIFO struct {
	// Compared is how many fans could be checked: first come, first
	// served, and seen waiting at least once.
	Compared int
	// Inversions is how many of them were passed over.
	Inversions int
}

// FansSeen sums up the fans.
func FansSeen(fans []Fan) Seen {
	s := Seen{Fans: len(fans), Notes: map[string]int{}}
	for _, f := range fans {
		s.Outcomes[f.Outcome]++
		if f.Joined {
			s.Joined++
			if f.Straight {
				s.StraightThrough++
			} else {
				s.Queued++
			}
		}
		if f.Admitted {
			s.Admitted++
			s.Waits = append(s.Waits, f.Wait)
			if f.ETA != nil {
				s.ETAErrors = append(s.ETAErrors, (f.Wait - *f.ETA).Seconds())
			}
		}
		if f.Outcome == Bought {
			s.Bought++
		}
		s.Seats += f.Seats
		if f.Note != "" {
			s.Notes[f.Note]++
		}
	}
	slices.Sort(s.Waits)
	slices.Sort(s.ETAErrors)
	s.FIFO = fifoOf(fans)
	return s
}

// fifoOf checks every fan seen waiting against the fans who joined after
// its join was answered: the earliest "admitted" among them must not come
// before its last "waiting" poll was sent. n log n: the later joiners
// sorted by when they joined, with the earliest admission of each suffix.
func fifoOf(fans []Fan) FIFO {
	type admission struct{ joinSent, admittedAt time.Time }
	var later []admission
	for _, f := range fans {
		if f.FIFO && f.Admitted {
			later = append(later, admission{f.JoinSent, f.AdmittedAt})
		}
	}
	slices.SortFunc(later, func(a, b admission) int { return a.joinSent.Compare(b.joinSent) })
	first := make([]time.Time, len(later)+1) // first[i]: the earliest admission of later[i:]
	for i := len(later) - 1; i >= 0; i-- {
		first[i] = later[i].admittedAt
		if !first[i+1].IsZero() && first[i+1].Before(first[i]) {
			first[i] = first[i+1]
		}
	}
	var out FIFO
	for _, a := range fans {
		if !a.FIFO || a.LastWaiting.IsZero() {
			continue
		}
		out.Compared++
		i, _ := slices.BinarySearchFunc(later, a.JoinedAt, func(x admission, t time.Time) int {
			if x.joinSent.After(t) {
				return 1
			}
			return -1
		})
		if i < len(later) && first[i].Before(a.LastWaiting) {
			out.Inversions++
		}
	}
	return out
}

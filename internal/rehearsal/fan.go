package rehearsal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/waitroom/waitroom/internal/proof"
)

// Outcome is how a fan's visit ended.
type Outcome int

// The outcomes, in the order a summary lists them.
const (
	Bought      Outcome = iota // booking CONFIRMED
	SoldOut                    // admitted, found no place left, left
	GaveUp                     // admitted, lost every hold race, left
	LeftLine                   // chose to leave the line (DELETE)
	Abandoned                  // chose to stop polling
	Expired                    // told 410, or the pass stopped working
	Failed                     // an answer the fan could not use
	Unfinished                 // still going when the rehearsal's time ran out (then left)
	ToldSoldOut                // told sold out while waiting (or at join)
	Passed                     // admitted, chose not to buy, gave the place back
	NotPaid                    // paid, and the booking ended FAILED or REFUNDED
	Outcomes                   // how many outcomes there are
)

var outcomeNames = [Outcomes]string{
	"bought", "admitted, found no seat left", "lost every hold race, left", "left the line", "stopped polling",
	"expired", "failed", "still going at the end, left", "told sold out while waiting", "admitted, did not buy, left",
	"paid, booking failed or refunded",
}

func (o Outcome) String() string {
	if o < 0 || o >= Outcomes {
		return "outcome(" + strconv.Itoa(int(o)) + ")"
	}
	return outcomeNames[o]
}

// Behaviour is what the simulated fans do.
type Behaviour struct {
	// Buy is the chance that an admitted fan books (holds one seat, or two
	// side by side, checks out and pays); the others give their place back
	// at once (DELETE). 1 = every fan tries.
	Buy float64
	// Abandon and Leave are the chances that a fan stops polling, or
	// leaves the line, 2–30 s after joining.
	Abandon, Leave float64
	// PressPay: the fan presses Pay on the provider's hosted page
	// (paymentUrl), as a fan does. Without, the provider must pay by
	// itself (the simulator's auto_pay).
	PressPay bool
	// Showtimes are the showtimes a buyer picks from, at random.
	Showtimes []int64
}

// Fan is what one fan saw. The instants are this machine's monotonic
// clock: what the FIFO check compares.
type Fan struct {
	Outcome  Outcome
	Joined   bool // got its place (201)
	Admitted bool
	// Straight: let in at its join, after no wait (an auto event with
	// room, DESIGN.md "Always on"; a passthrough one).
	Straight bool
	// FIFO: the fan's place is first come, first served (it joined after
	// opening, not into a pre-queue's lottery); known once it is admitted,
	// or from the start when the room has no lottery.
	FIFO  bool
	Wait  time.Duration  // join answer → first admitted answer
	ETA   *time.Duration // etaSeconds told at join
	Seats int            // seats bought
	Note  string         // why a fan failed

	JoinSent    time.Time // its joining request (the last one, which got the place)
	JoinedAt    time.Time // its 201
	AdmittedAt  time.Time // its first answer "admitted"
	LastWaiting time.Time // when it sent the last poll answered "waiting"
	DoneAt      time.Time // the end of its wait: admitted, or told sold out
}

// fanRun is one fan's visit in progress.
type fanRun struct {
	c     *Client
	r     *run
	i     int
	rng   *mrand.Rand
	b     Behaviour
	event string
}

func (f *fanRun) do(ctx context.Context, req Request) (Answer, error) { return f.c.Do(ctx, f.i, req) }

type ticketAnswer struct {
	Ticket      string `json:"ticket"`
	Status      string `json:"status"`
	ETASeconds  *int64 `json:"etaSeconds"`
	PollAfterMs int64  `json:"pollAfterMs"`
	AccessToken string `json:"accessToken"`
	Challenge   string `json:"challenge"`
	Bits        int    `json:"bits"`
}

// visit is one fan's whole visit: join (paying the proof of work when
// asked), wait as told, then book or leave. A fan whose time runs out
// (ctx) gives back what it holds before it goes.
func (f *fanRun) visit(ctx context.Context, arrive time.Time) (out Fan) {
	if !sleepUntil(ctx, arrive) {
		return Fan{Outcome: Unfinished}
	}
	tickets := "/api/v1/events/" + f.event + "/tickets"
	var join ticketAnswer
	proofHeader := ""
	for {
		sent := time.Now()
		a, err := f.do(ctx, Request{Method: http.MethodPost, Path: tickets, Proof: proofHeader})
		if ctx.Err() != nil {
			return Fan{Outcome: Unfinished}
		}
		switch {
		case err == nil && (a.Status == http.StatusCreated || a.Status == http.StatusOK):
			if err := json.Unmarshal(a.Body, &join); err != nil || join.Ticket == "" {
				return Fan{Outcome: Failed, Note: "join answer: " + string(a.Body)}
			}
			out.JoinSent = sent
		case err == nil && a.Status == http.StatusPreconditionRequired:
			var ch ticketAnswer
			if json.Unmarshal(a.Body, &ch) != nil || ch.Challenge == "" {
				return Fan{Outcome: Failed, Note: "proof asked: " + string(a.Body)}
			}
			proofHeader = ch.Challenge + ":" + proof.Solve(ch.Challenge, ch.Bits)
			continue
		case err == nil && a.Status == http.StatusConflict && a.Error() == "sold_out":
			now := time.Now()
			return Fan{Outcome: ToldSoldOut, JoinedAt: now, DoneAt: now}
		case err == nil && a.Status < 500 && a.Status != http.StatusTooManyRequests:
			return Fan{Outcome: Failed, Note: fmt.Sprintf("join: %d %s", a.Status, a.Body)}
		default:
			sleepUntil(ctx, time.Now().Add(max(time.Second, a.RetryAfter)))
			continue
		}
		break
	}
	out.Joined, out.JoinedAt = true, time.Now()
	f.r.live.Joined.Add(1)
	f.r.live.Waiting.Add(1)
	waiting := true
	stopWaiting := func() {
		if waiting {
			waiting = false
			f.r.live.Waiting.Add(-1)
		}
	}
	defer stopWaiting()
	if join.ETASeconds != nil {
		eta := time.Duration(*join.ETASeconds) * time.Second
		out.ETA = &eta
	}
	// The fan's fate: a few stop polling or leave 2–30 s after joining.
	var abandonAt, leaveAt time.Time
	switch x := f.rng.Float64(); {
	case x < f.b.Abandon:
		abandonAt = out.JoinedAt.Add(time.Duration(2+f.rng.IntN(28)) * time.Second)
	case x < f.b.Abandon+f.b.Leave:
		leaveAt = out.JoinedAt.Add(time.Duration(2+f.rng.IntN(28)) * time.Second)
	}
	me := tickets + "/" + join.Ticket
	leave := func(ctx context.Context) { _, _ = f.do(ctx, Request{Method: http.MethodDelete, Path: me}) }
	// giveBack leaves with a fresh budget: the fan's own may be spent.
	giveBack := func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		leave(c)
	}

	poll := time.Duration(join.PollAfterMs) * time.Millisecond
	token := join.AccessToken // set when let in at the join: passthrough, or straight through
	out.Straight = token != ""
	for token == "" {
		next := time.Now().Add(poll)
		switch {
		case !abandonAt.IsZero() && next.After(abandonAt):
			sleepUntil(ctx, abandonAt)
			out.Outcome = Abandoned
			return out
		case !leaveAt.IsZero() && next.After(leaveAt):
			if sleepUntil(ctx, leaveAt) {
				leave(ctx)
			}
			out.Outcome = LeftLine
			return out
		}
		if !sleepUntil(ctx, next) {
			giveBack()
			out.Outcome = Unfinished
			return out
		}
		sent := time.Now()
		a, err := f.do(ctx, Request{Method: http.MethodGet, Path: me})
		switch {
		case ctx.Err() != nil:
			giveBack()
			out.Outcome = Unfinished
			return out
		case err != nil || a.Status >= 500:
			poll = max(time.Second, a.RetryAfter)
		case a.Status == http.StatusGone:
			out.Outcome = Expired
			return out
		case a.Status == http.StatusOK:
			var st ticketAnswer
			if err := json.Unmarshal(a.Body, &st); err != nil {
				out.Outcome, out.Note = Failed, "status answer: "+string(a.Body)
				return out
			}
			switch st.Status {
			case "admitted":
				token = st.AccessToken
			case "soldout":
				// The wait is over: nothing is left to wait for.
				out.Outcome, out.DoneAt = ToldSoldOut, time.Now()
				return out
			default:
				out.LastWaiting = sent
				poll = time.Duration(st.PollAfterMs) * time.Millisecond
			}
		default:
			out.Outcome, out.Note = Failed, fmt.Sprintf("status: %d %s", a.Status, a.Body)
			return out
		}
	}
	out.Admitted, out.AdmittedAt = true, time.Now()
	out.Wait, out.DoneAt = out.AdmittedAt.Sub(out.JoinedAt), out.AdmittedAt
	stopWaiting()
	f.r.live.Admitted.Add(1)
	out.FIFO = f.firstComeFirstServed(ctx, join.Ticket)
	switch {
	case !abandonAt.IsZero(): // admitted before they gave up: gone all the same
		out.Outcome = Abandoned
		return out
	case !leaveAt.IsZero():
		leave(ctx)
		out.Outcome = LeftLine
		return out
	case f.rng.Float64() >= f.b.Buy:
		leave(ctx)
		out.Outcome = Passed
		return out
	}
	var hold string
	out.Outcome, out.Seats, out.Note, hold = f.book(ctx, token)
	switch out.Outcome {
	case SoldOut, GaveUp:
		leave(ctx)
	case Unfinished:
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if hold != "" {
			_, _ = f.do(c, Request{Method: http.MethodDelete, Path: "/api/v1/booking/holds/" + hold, Token: token})
		}
		leave(c)
	case Bought:
		f.r.live.Bought.Add(1)
	}
	return out
}

// firstComeFirstServed asks the room whether the fan's place was first
// come, first served: always, in a room whose sale has no lottery; else
// when the lottery says the ticket is not one of its entries.
func (f *fanRun) firstComeFirstServed(ctx context.Context, ticket string) bool {
	if !f.r.hasLottery(ctx, f.c, f.event) {
		return true
	}
	a, err := f.do(ctx, Request{Method: http.MethodGet, Path: "/api/v1/events/" + f.event + "/lottery/" + ticket, Uncounted: true})
	return err == nil && a.Status == http.StatusNotFound && a.Error() == "not_in_lottery"
}

// book is an admitted fan's part: read a showtime's seat map, hold one
// available seat or two side by side (or one general-admission place
// where no seat is left; a few tries when someone was faster), check out,
// press Pay on the provider's page if told to, and poll the booking until
// it is settled. hold is the hold taken, "" once it is checked out.
func (f *fanRun) book(ctx context.Context, token string) (o Outcome, seats int, note, hold string) {
	if len(f.b.Showtimes) == 0 {
		return Failed, 0, "no showtime to book", ""
	}
	show := "/api/v1/booking/showtimes/" + strconv.FormatInt(f.b.Showtimes[f.rng.IntN(len(f.b.Showtimes))], 10)
	var held struct {
		HoldID           string           `json:"holdId"`
		Seats            []string         `json:"seats"`
		GeneralAdmission map[string]int64 `json:"generalAdmission"`
	}
	for attempt := 0; attempt < 4 && held.HoldID == ""; attempt++ {
		a, err := f.do(ctx, Request{Method: http.MethodGet, Path: show + "/seats", Token: token})
		switch {
		case ctx.Err() != nil:
			return Unfinished, 0, "", ""
		case err != nil || a.Status >= 500:
			sleepUntil(ctx, time.Now().Add(500*time.Millisecond))
			continue
		case a.Status == http.StatusUnauthorized:
			return Expired, 0, "seat map: 401", ""
		case a.Status != http.StatusOK:
			return Failed, 0, fmt.Sprintf("seat map: %d %s", a.Status, a.Body), ""
		}
		var seatMap struct {
			Seats []struct {
				Code   string `json:"code"`
				Status string `json:"status"`
			} `json:"seats"`
			GeneralAdmission []struct {
				Code      string `json:"code"`
				Available int64  `json:"available"`
			} `json:"generalAdmission"`
		}
		if err := json.Unmarshal(a.Body, &seatMap); err != nil {
			return Failed, 0, "seat map: " + err.Error(), ""
		}
		free := map[string]bool{}
		var codes []string
		for _, s := range seatMap.Seats {
			if s.Status == "AVAILABLE" {
				free[s.Code] = true
				codes = append(codes, s.Code)
			}
		}
		var want map[string]any
		switch {
		case len(codes) > 0:
			// One seat, or two side by side when the neighbour is free.
			first := codes[f.rng.IntN(len(codes))]
			pick := []string{first}
			if f.rng.IntN(2) == 1 {
				row, num := first[:1], first[1:]
				n, _ := strconv.Atoi(num)
				if next := row + strconv.Itoa(n+1); free[next] {
					pick = append(pick, next)
				}
			}
			want = map[string]any{"seats": pick}
		default:
			for _, b := range seatMap.GeneralAdmission {
				if b.Available > 0 {
					want = map[string]any{"generalAdmission": map[string]int{b.Code: 1}}
					break
				}
			}
		}
		if want == nil {
			return SoldOut, 0, "", ""
		}
		a, err = f.do(ctx, Request{Method: http.MethodPost, Path: show + "/holds", Token: token, Body: want})
		switch {
		case ctx.Err() != nil:
			return Unfinished, 0, "", ""
		case err != nil || a.Status >= 500:
			continue
		case a.Status == http.StatusCreated:
			if err := json.Unmarshal(a.Body, &held); err != nil || held.HoldID == "" {
				return Failed, 0, "hold answer: " + string(a.Body), ""
			}
		case a.Status == http.StatusConflict:
			// someone was faster: read the map again
		case a.Status == http.StatusTooManyRequests:
			sleepUntil(ctx, time.Now().Add(max(time.Second, a.RetryAfter)))
		case a.Status == http.StatusUnauthorized:
			return Expired, 0, "hold: 401", ""
		default:
			return Failed, 0, fmt.Sprintf("hold: %d %s", a.Status, a.Body), ""
		}
	}
	if held.HoldID == "" {
		return GaveUp, 0, "", ""
	}
	places := len(held.Seats)
	for _, n := range held.GeneralAdmission {
		places += int(n)
	}

	idem := randomKey()
	var co struct {
		BookingID  string `json:"bookingId"`
		PaymentURL string `json:"paymentUrl"`
	}
	for attempt := 0; attempt < 3 && co.BookingID == ""; attempt++ {
		a, err := f.do(ctx, Request{Method: http.MethodPost, Path: "/api/v1/booking/holds/" + held.HoldID + "/checkout", Token: token, Idempotency: idem})
		switch {
		case ctx.Err() != nil:
			return Unfinished, 0, "", held.HoldID
		case err != nil || a.Status >= 500:
			sleepUntil(ctx, time.Now().Add(500*time.Millisecond))
		case a.Status == http.StatusCreated:
			if err := json.Unmarshal(a.Body, &co); err != nil || co.BookingID == "" {
				return Failed, 0, "checkout answer: " + string(a.Body), held.HoldID
			}
		default:
			return Failed, 0, fmt.Sprintf("checkout: %d %s", a.Status, a.Body), held.HoldID
		}
	}
	if co.BookingID == "" {
		return Failed, 0, "checkout: no answer", held.HoldID
	}
	if f.b.PressPay {
		code, err := f.c.PressPay(ctx, co.PaymentURL)
		switch {
		case ctx.Err() != nil:
			return Unfinished, 0, "", ""
		case err != nil:
			return Failed, 0, "the provider's page: " + err.Error(), ""
		case code != http.StatusSeeOther:
			return Failed, 0, fmt.Sprintf("the provider's page: Pay answered %d", code), ""
		}
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		if !sleepUntil(ctx, time.Now().Add(500*time.Millisecond)) {
			return Unfinished, 0, "", ""
		}
		a, err := f.do(ctx, Request{Method: http.MethodGet, Path: "/api/v1/booking/bookings/" + co.BookingID, Token: token})
		if err != nil || a.Status >= 500 {
			continue
		}
		if a.Status != http.StatusOK {
			return Failed, 0, fmt.Sprintf("booking: %d %s", a.Status, a.Body), ""
		}
		var bk struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(a.Body, &bk); err != nil {
			return Failed, 0, "booking answer: " + string(a.Body), ""
		}
		switch bk.Status {
		case "CONFIRMED":
			return Bought, places, "", ""
		case "FAILED", "REFUNDED":
			return NotPaid, 0, "booking " + bk.Status, ""
		}
	}
	return Failed, 0, "booking never settled", ""
}

// sleepUntil waits for t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

func randomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

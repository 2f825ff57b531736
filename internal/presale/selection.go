package presale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/notify"
	"github.com/waitroom/waitroom/internal/rdb"
)

// The selection is drawn as the lottery is (package draw): a commitment
// when registration opens (the first registration, or the admitter's step,
// whichever comes first), the registrations frozen at its close by Redis
// TIME, the key mixed with their digest. Then the admitter settles each
// window as it closes (top-ups). Every step is safe to run again after an
// admitter died in the middle of it: the draw writes the same figures
// every time (it depends on the seed and the frozen registrations alone),
// and a window is settled once (topUpScript).

// Step moves event's presale on (the admitter, every tick): commit, freeze
// and draw at the close, then settle the windows that closed.
func (s *Store) Step(ctx context.Context, event string, p Plan) error {
	nonce, commitment, err := s.seeds.Commit(event, draw.Selection)
	if err != nil {
		return fmt.Errorf("presale step: %w", err)
	}
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: stepScript, Keys: []string{k.Presale, k.PresaleAccounts, k.PresaleLog},
		Args: []any{p.RegistrationOpensAt.UnixMilli(), p.RegistrationClosesAt.UnixMilli(), nonce, commitment}}).Slice()
	if err != nil {
		return rdb.Interpret("presale step", err)
	}
	st, err := draw.StepOf(v)
	if err != nil {
		return err
	}
	switch st.Phase {
	case draw.Due:
		logLen := st.Rest.Int(0)
		if err := st.Rest.Err(); err != nil {
			return fmt.Errorf("presale step: %w", err)
		}
		// The admitter derives the seed now, from the draw secret and the
		// nonce: it was never in Redis.
		seed, err := s.seeds.SeedOf(event, draw.Selection, st)
		if err != nil {
			return fmt.Errorf("selection: %w", err)
		}
		return s.draw(ctx, event, p, seed, st.Entries, logLen)
	case draw.Done:
		if err := s.topUps(ctx, event); err != nil {
			return err
		}
		return s.mail(ctx, event)
	}
	return nil
}

// mail emails the invitations made since the last step (ranks mailed+1 …
// invited) to those who left an address, then moves mailed on. An
// admitter that dies in between mails them again: the outbox keeps one
// message per registration.
func (s *Store) mail(ctx context.Context, event string) error {
	if s.outbox == nil {
		return nil
	}
	k := rdb.KeysOf(event)
	st, err := s.state(ctx, event)
	if err != nil || st.mailed >= st.invited {
		return err
	}
	accounts, err := s.holders(ctx, event, st.mailed+1, st.invited)
	if err != nil {
		return err
	}
	ids, err := s.ranked(ctx, event, st.mailed+1, st.invited)
	if err != nil {
		return err
	}
	contacts, err := s.c.HMGet(ctx, k.PresaleContacts, accounts...).Result()
	if err != nil {
		return rdb.Interpret("presale mail", err)
	}
	path := "/e/" + event + "/register"
	for i, c := range contacts {
		if accounts[i] == "" {
			continue // withdrawn: skipped when invitations go out
		}
		contact, _ := c.(string)
		lang, email, ok := strings.Cut(contact, " ")
		g, invited := st.groupOf(st.mailed + 1 + int64(i))
		if !ok || !invited || !notify.ValidAddress(email) {
			continue
		}
		m := notify.Message{Kind: notify.KindPresaleSelected, Key: ids[i], To: email, Lang: lang, NotAfter: g.closes,
			Data: map[string]string{"opens": g.opens.Format(time.RFC3339), "until": g.closes.Format(time.RFC3339), "path": path}}
		if _, err := s.outbox.Enqueue(ctx, event, m); err != nil {
			return err
		}
	}
	return rdb.Interpret("presale mail", s.c.HSet(ctx, k.Presale, "mailed", st.invited).Err())
}

// draw ranks the frozen registrations and publishes the selection, in the
// draw's lifecycle (draw.Run, under its lease: an admitter that finds
// another drawing leaves it be), with the private list of the accounts
// behind the ranks and the plan it pins: a reload that changes the plan
// afterwards changes no invitation or window.
func (s *Store) draw(ctx context.Context, event string, p Plan, seed []byte, n, logLen int64) error {
	var regs []registration // sorted by id: the entries as draw.Run was given them
	_, err := draw.Run(ctx, s.c, rdb.SelectionDraw(event), s.owner, seed, draw.Apply{
		Entries: func(ctx context.Context) ([]string, error) {
			var err error
			if regs, err = s.registrations(ctx, event, n, logLen); err != nil {
				return nil, err
			}
			ids := make([]string, len(regs))
			for i, r := range regs {
				ids[i] = r.id
			}
			return ids, nil
		},
		With: func(ctx context.Context, pl redis.Pipeliner, d *draw.Drawn) {
			holders := make([]draw.Entry, len(d.Entries))
			for i, e := range d.Entries {
				holders[i] = draw.Entry{ID: regs[e.Index].account}
			}
			draw.Parts(holders, func(i int, part string) { pl.Set(ctx, rdb.PresaleHoldersKey(event, i), part, 0) })
		},
		Fields: func(d *draw.Drawn) []any {
			selected := min(int64(p.Selected), int64(len(d.IDs)))
			return []any{"selected", selected, "invited", selected, "toppedUp", 0, "settled", 0,
				"groupSize", p.GroupSize, "window", p.Window.Milliseconds(), "opensAt", p.OpensAt.UnixMilli()}
		},
	})
	if err != nil {
		return fmt.Errorf("selection: %w", err)
	}
	return nil
}

// registration is one frozen registration; account is "" once withdrawn.
type registration struct{ id, account string }

// registrations reads the n frozen registrations, sorted by id, from the
// first logLen entries of the log (frozen with them): every registration
// made, those withdrawn too (an entry for good, its account forgotten:
// nobody holds its rank).
func (s *Store) registrations(ctx context.Context, event string, n, logLen int64) ([]registration, error) {
	out := make([]registration, 0, n)
	var gone []string
	err := s.c.ReadList(ctx, rdb.KeysOf(event).PresaleLog, logLen, func(page []string) {
		for _, e := range page {
			if id, ok := strings.CutPrefix(e, "-"); ok {
				gone = append(gone, id)
			} else if id, acct, ok := strings.Cut(e, " "); ok {
				out = append(out, registration{id: id, account: acct})
			}
		}
	})
	if err != nil {
		return nil, rdb.Interpret("selection", err)
	}
	slices.SortFunc(out, func(a, b registration) int { return strings.Compare(a.id, b.id) })
	for _, id := range gone {
		if i, found := slices.BinarySearchFunc(out, id, func(r registration, id string) int { return strings.Compare(r.id, id) }); found {
			out[i].account = ""
		}
	}
	if int64(len(out)) != n {
		return nil, fmt.Errorf("selection: %d registrations froze, %d in the log", n, len(out))
	}
	return out, nil
}

// topUps settles every window that has closed and is not settled yet, the
// earliest close first, under the lease: the invitations a group left
// unused (never joined, or a place that ended without a booking) go to the
// next ranks on the wait list as a new group, as many as places are left
// for them: the places the booking core says are available, less the fans
// live in line, less the invitations still out (in windows open or to
// come, not used yet).
func (s *Store) topUps(ctx context.Context, event string) (err error) {
	st, err := s.state(ctx, event)
	if err != nil {
		return err
	}
	now := s.now()
	due := st.due(now)
	if len(due) == 0 {
		return nil
	}
	k := rdb.KeysOf(event)
	ok, err := s.c.TakeLease(ctx, k.PresaleDrawing, s.owner, draw.Lease)
	if err != nil || !ok {
		return err
	}
	defer func() { _ = s.c.ReleaseLease(ctx, k.PresaleDrawing, s.owner) }()
	for {
		// Read again under the lease: another admitter may have settled.
		if st, err = s.state(ctx, event); err != nil {
			return err
		}
		due = st.due(now)
		if len(due) == 0 {
			return nil
		}
		g := due[0]
		k, err := s.topUpSize(ctx, event, st, g, now)
		if err != nil {
			return err
		}
		res, err := s.c.Run(ctx, rdb.Call{Script: topUpScript, Keys: []string{rdb.KeysOf(event).Presale, rdb.KeysOf(event).PresaleTopUps, rdb.KeysOf(event).PresaleDrawing},
			Args: []any{g.name, k, g.closes.UnixMilli(), g.closes.Add(st.window).UnixMilli(), s.owner}}).Int64Slice()
		if err != nil {
			return rdb.Interpret("top-up", err)
		}
		if res[0] < 0 {
			return nil // not closed yet by Redis TIME: a later step settles it
		}
	}
}

// due are the groups whose window has closed and which are not settled,
// the earliest close first.
func (st selection) due(now time.Time) []group {
	var out []group
	for _, g := range st.groups() {
		if !now.Before(g.closes) && !st.settled[g.name] {
			out = append(out, g)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].closes.Before(out[j-1].closes); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// topUpSize is how many ranks the closing of g invites.
func (s *Store) topUpSize(ctx context.Context, event string, st selection, g group, now time.Time) (int64, error) {
	waitlist := st.entries - st.invited
	if waitlist <= 0 {
		return 0, nil
	}
	states, err := s.groupStates(ctx, event, g)
	if err != nil {
		return 0, err
	}
	var unused int64
	for _, ps := range states {
		if !ps.Used() {
			unused++
		}
	}
	k := min(unused, waitlist)
	if k == 0 {
		return 0, nil
	}
	left, known, err := s.places.PlacesLeft(ctx, event)
	if err != nil || !known {
		return k, err
	}
	// The invitations still out: in windows open or to come, not used.
	for _, o := range st.groups() {
		if o.name == g.name || !now.Before(o.closes) {
			continue
		}
		states, err := s.groupStates(ctx, event, o)
		if err != nil {
			return 0, err
		}
		for _, ps := range states {
			if ps == NoPlace {
				left--
			}
		}
	}
	return max(0, min(k, left)), nil
}

// groupStates says what became of the places of g's accounts. A rank
// whose registration was withdrawn is held by nobody: its invitation is
// never used.
func (s *Store) groupStates(ctx context.Context, event string, g group) ([]PlaceState, error) {
	accounts, err := s.holders(ctx, event, g.from, g.to)
	if err != nil {
		return nil, err
	}
	held := make([]string, 0, len(accounts))
	for _, a := range accounts {
		if a != "" {
			held = append(held, a)
		}
	}
	states, err := s.places.PlaceStates(ctx, event, held)
	if err != nil {
		return nil, err
	}
	for range len(accounts) - len(held) {
		states = append(states, NoPlace)
	}
	return states, nil
}

// holders reads the accounts of ranks from…to (1 = first), from the
// private parts the draw wrote: "" for a rank whose registration was
// withdrawn.
func (s *Store) holders(ctx context.Context, event string, from, to int64) ([]string, error) {
	return s.parts(ctx, event, rdb.PresaleHoldersKey, from, to)
}

// ranked reads the registration ids of ranks from…to, from the published
// list.
func (s *Store) ranked(ctx context.Context, event string, from, to int64) ([]string, error) {
	return s.parts(ctx, event, rdb.PresaleRankedKey, from, to)
}

// parts reads lines from…to (1 = first) of a list the draw wrote in parts.
func (s *Store) parts(ctx context.Context, event string, key func(string, int) string, from, to int64) ([]string, error) {
	var out []string
	for part := (from - 1) / draw.PartSize; part <= (to-1)/draw.PartSize; part++ {
		text, err := s.c.Get(ctx, key(event, int(part))).Result()
		if err != nil {
			return nil, rdb.Interpret("selection", err)
		}
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		base := part * draw.PartSize // rank of lines[0] is base+1
		for i, a := range lines {
			if r := base + int64(i) + 1; r >= from && r <= to {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// Selection is the selection's public face: the lottery's shape.
func (s *Store) Selection(ctx context.Context, event string, p Plan) (draw.Published, error) {
	out, err := draw.Read(ctx, s.c, rdb.SelectionDraw(event), p.RegistrationClosesAt)
	if errors.Is(err, draw.ErrNone) {
		return draw.Published{}, ErrNoPresale
	}
	return out, err
}

// Entries writes the drawn selection's registration ids in rank order, one
// per line, part by part. ErrNoPresale or ErrNotDrawn (nothing written)
// before.
func (s *Store) Entries(ctx context.Context, event string, w io.Writer) error {
	err := draw.WriteEntries(ctx, s.c, rdb.SelectionDraw(event), w)
	switch {
	case errors.Is(err, draw.ErrNone):
		return ErrNoPresale
	case errors.Is(err, draw.ErrNotDrawn):
		return ErrNotDrawn
	}
	return err
}

// Figures are the presale's lines of the sale's report.
type Figures struct {
	Registrations int64 // current (withdrawn ones not counted; frozen at the close)
	Selected      int64 // invited by the selection itself
	Invited       int64 // every invitation, top-ups included
	ToppedUp      int64
	CodesUsed     int64 // uses of access codes spent
}

// Figures reads the presale's and the codes' figures for the report.
func (s *Store) Figures(ctx context.Context, event string) (Figures, error) {
	k := rdb.KeysOf(event)
	var n *redis.IntCmd
	var h *redis.SliceCmd
	var used *redis.StringCmd
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		n = p.HLen(ctx, k.PresaleAccounts)
		h = p.HMGet(ctx, k.Presale, "selected", "invited", "toppedUp")
		used = p.HGet(ctx, k.CodesInfo, "used")
		return nil
	})
	if err != nil && err != redis.Nil {
		return Figures{}, rdb.Interpret("presale figures", err)
	}
	v := h.Val()
	u, _ := used.Int64()
	return Figures{Registrations: n.Val(), Selected: rdb.Num(v[0]), Invited: rdb.Num(v[1]), ToppedUp: rdb.Num(v[2]), CodesUsed: u}, nil
}

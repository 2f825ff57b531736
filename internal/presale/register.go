package presale

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/rdb"
)

// maxAccountLen bounds an account id (as the line's).
const maxAccountLen = 128

// MaxRegistrations is how many registrations an account may make per
// event, withdrawn ones included (DESIGN.md, Fair play, third round).
const MaxRegistrations = 3

// Register registers account for event's presale: one registration per
// account, however many devices race (the second gets the first's, created
// false). Outside the registration window ErrRegistrationClosed; an
// account that made MaxRegistrations already ErrTooManyRegistrations.
func (s *Store) Register(ctx context.Context, event string, p Plan, account string) (id string, created bool, err error) {
	if account == "" {
		return "", false, ErrAccountRequired
	}
	if len(account) > maxAccountLen || strings.ContainsAny(account, "\n ") {
		return "", false, fmt.Errorf("register: account id %.20q: longer than %d, or holds a space or a line break", account, maxAccountLen)
	}
	nonce, commitment, err := s.seeds.Commit(event, draw.Selection)
	if err != nil {
		return "", false, fmt.Errorf("register: %w", err)
	}
	var random [12]byte
	if _, err := rand.Read(random[:]); err != nil {
		return "", false, fmt.Errorf("register: %w", err)
	}
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: registerScript, Keys: []string{k.Presale, k.PresaleAccounts, k.PresaleLog, k.PresaleMade},
		Args: []any{p.RegistrationOpensAt.UnixMilli(), p.RegistrationClosesAt.UnixMilli(), nonce, commitment,
			base64.RawURLEncoding.EncodeToString(random[:]), account, MaxRegistrations}}).Slice()
	if err != nil {
		return "", false, rdb.Interpret("register", err)
	}
	r := rdb.ReplyOf(v)
	switch r.Str(0) {
	case "closed":
		return "", false, ErrRegistrationClosed
	case "had":
		return r.Str(1), false, r.Err()
	case "new":
		return r.Str(1), true, r.Err()
	case "limited":
		return "", false, ErrTooManyRegistrations
	}
	return "", false, fmt.Errorf("register: unexpected reply %v", v)
}

// Remember keeps where account is told its window if it is invited: the
// address the origin site signed, and the language of its pages.
func (s *Store) Remember(ctx context.Context, event, account, email, lang string) error {
	err := s.c.HSet(ctx, rdb.KeysOf(event).PresaleContacts, account, lang+" "+email).Err()
	return rdb.Interpret("registration", err)
}

// Withdraw withdraws account's registration (before the close; a new one
// afterwards gets a new id). ErrNotRegistered when it has none.
func (s *Store) Withdraw(ctx context.Context, event string, p Plan, account string) error {
	if account == "" {
		return ErrAccountRequired
	}
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: withdrawScript, Keys: []string{k.Presale, k.PresaleAccounts, k.PresaleLog},
		Args: []any{p.RegistrationOpensAt.UnixMilli(), p.RegistrationClosesAt.UnixMilli(), account}}).Result()
	if err != nil {
		return rdb.Interpret("withdraw", err)
	}
	switch v {
	case "closed":
		return ErrRegistrationClosed
	case int64(0):
		return ErrNotRegistered
	}
	return nil
}

// Status reads account's registration: its status, and once drawn its
// rank and (selected) its window. ErrNotRegistered when it has none.
func (s *Store) Status(ctx context.Context, event string, p Plan, account string) (Registration, error) {
	if account == "" {
		return Registration{}, ErrAccountRequired
	}
	k := rdb.KeysOf(event)
	id, err := s.c.HGet(ctx, k.PresaleAccounts, account).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return Registration{}, ErrNotRegistered
		}
		return Registration{}, rdb.Interpret("registration", err)
	}
	out := Registration{ID: id, Status: Registered}
	st, err := s.state(ctx, event)
	if err != nil || !st.drawn {
		return out, err
	}
	seq, ok := draw.Seq(id)
	if !ok {
		return Registration{}, fmt.Errorf("registration: id %q has no sequence number", id)
	}
	ranks, err := s.c.BitField(ctx, k.PresaleRanks, "GET", "u32", "#"+strconv.FormatInt(seq, 10)).Result()
	if err != nil {
		return Registration{}, rdb.Interpret("registration", err)
	}
	out.Rank = ranks[0]
	if out.Rank == 0 {
		// Registered after the freeze: impossible (the registration script
		// refuses); say what is true of it rather than fail.
		out.Status = NotSelected
		return out, nil
	}
	switch g, ok := st.groupOf(out.Rank); {
	case ok:
		out.Status = Selected
		out.WindowOpensAt, out.WindowClosesAt = &g.opens, &g.closes
	case st.final(s.now()) || (p.GeneralSaleAt != nil && !s.now().Before(*p.GeneralSaleAt)):
		out.Status = NotSelected
	default:
		out.Status = Waitlisted
	}
	return out, nil
}

// selection is the presale's state as Redis holds it.
type selection struct {
	drawn                     bool
	entries                   int64
	selected, invited, topped int64
	settledCount              int64
	mailed                    int64 // ranks emailed so far
	groupSize                 int64
	window                    time.Duration
	opensAt                   time.Time
	settled                   map[string]bool
	topups                    []group
}

// group is one window's invitations: ranks from…to.
type group struct {
	name          string // "i<g>" (the selection's group g) or "t<j>" (top-up j)
	from, to      int64
	opens, closes time.Time
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// state reads the presale's state (its hash and top-up groups) at once.
func (s *Store) state(ctx context.Context, event string) (selection, error) {
	k := rdb.KeysOf(event)
	var hc *redis.MapStringStringCmd
	var tc *redis.StringSliceCmd
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		hc, tc = p.HGetAll(ctx, k.Presale), p.LRange(ctx, k.PresaleTopUps, 0, -1)
		return nil
	})
	if err != nil {
		return selection{}, rdb.Interpret("presale", err)
	}
	h, tops := hc.Val(), tc.Val()
	n := func(f string) int64 { v, _ := strconv.ParseInt(h[f], 10, 64); return v }
	st := selection{drawn: h["drawn"] != "",
		entries: n("entries"), selected: n("selected"), invited: n("invited"), topped: n("toppedUp"),
		settledCount: n("settled"), mailed: n("mailed"), groupSize: n("groupSize"), window: time.Duration(n("window")) * time.Millisecond,
		opensAt: msTime(n("opensAt")), settled: map[string]bool{}}
	for f := range h {
		if name, ok := strings.CutPrefix(f, "settled:"); ok {
			st.settled[name] = true
		}
	}
	for j, t := range tops {
		var g group
		var o, c int64
		if _, err := fmt.Sscanf(t, "%d %d %d %d", &g.from, &g.to, &o, &c); err != nil {
			return selection{}, fmt.Errorf("presale: top-up %q: %w", t, err)
		}
		g.name, g.opens, g.closes = "t"+strconv.Itoa(j), msTime(o), msTime(c)
		st.topups = append(st.topups, g)
	}
	return st, nil
}

// groups are every window's invitations so far: the selection's groups,
// then the top-ups, in the order they were made.
func (st selection) groups() []group {
	var out []group
	if st.groupSize > 0 {
		for g := int64(0); g*st.groupSize < st.selected; g++ {
			opens := st.opensAt.Add(time.Duration(g) * st.window)
			out = append(out, group{name: "i" + strconv.FormatInt(g, 10), from: g*st.groupSize + 1,
				to: min((g+1)*st.groupSize, st.selected), opens: opens, closes: opens.Add(st.window)})
		}
	}
	return append(out, st.topups...)
}

// groupOf is the group that invited rank, if one did (GateLua's rule).
func (st selection) groupOf(rank int64) (group, bool) {
	if !st.drawn || rank < 1 || rank > st.invited {
		return group{}, false
	}
	if rank <= st.selected {
		g := (rank - 1) / st.groupSize
		return st.groups()[g], true
	}
	for _, g := range st.topups {
		if rank >= g.from && rank <= g.to {
			return g, true
		}
	}
	return group{}, false
}

// final: every window so far has closed and been settled: nobody else will
// be invited.
func (st selection) final(now time.Time) bool {
	if !st.drawn {
		return false
	}
	gs := st.groups()
	for _, g := range gs {
		if now.Before(g.closes) || !st.settled[g.name] {
			return false
		}
	}
	return true
}

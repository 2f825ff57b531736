package draw

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
)

// The lifecycle of a committed draw in Redis, the same for the lottery and
// the selection: commit, freeze (Lua, draw_step in each kind's step
// script), draw and publish (Run), read (Read, WriteEntries). What differs
// is given as Apply: the lottery also writes its entries' scores into the
// line, the selection the private list of who holds each rank and the plan
// it pins.

// Errors of the draw's readers.
var (
	// ErrNone: nothing is committed (the caller says what that means: no
	// lottery, no presale).
	ErrNone = errors.New("draw: none committed")
	// ErrNotDrawn: committed, not published yet.
	ErrNotDrawn = errors.New("draw: not drawn yet")
)

// Phase is where a draw is, as draw_step says.
type Phase string

const (
	Early Phase = "early" // nothing committed, and nothing due
	Open  Phase = "open"  // committed; the entries freeze later
	Due   Phase = "draw"  // frozen: the draw is due, or under way
	Done  Phase = "done"  // drawn and applied
)

// Step is a draw's state as its kind's step script answers it (Lua).
type Step struct {
	Phase      Phase
	Nonce      []byte // once committed
	Commitment string // hex, once committed
	Entries    int64  // once frozen
	Digest     string // hex, once drawn
	// Rest is the reply's elements the kind's script appended.
	Rest *rdb.Reply
}

// stepReply is how many elements of a step script's reply are draw_step's.
const stepReply = 5

// StepOf reads a step script's reply.
func StepOf(v []any) (Step, error) {
	r := rdb.ReplyOf(v)
	st := Step{Phase: Phase(r.Str(0)), Entries: r.Int(2), Digest: r.Str(3), Commitment: r.Str(4)}
	if err := r.Err(); err != nil {
		return Step{}, fmt.Errorf("draw: step: %w", err)
	}
	if s := r.Str(1); s != "" {
		nonce, err := hex.DecodeString(s)
		if err != nil || len(nonce) != NonceSize {
			return Step{}, fmt.Errorf("draw: the nonce in Redis %q: not %d bytes of hex", s, NonceSize)
		}
		st.Nonce = nonce
	}
	st.Rest = rdb.ReplyOf(v[stepReply:])
	return st, nil
}

// Lease is how long one process may draw before another takes over (one
// that died mid-draw).
const Lease = 30 * time.Second

// Drawn is a draw ranked: what Run hands the kind's writes.
type Drawn struct {
	Key     []byte
	Digest  []byte
	IDs     []string // the entries as read
	Entries []Entry  // in rank order (Entry.Index into IDs)
}

// Apply is what one kind of draw does besides the common steps, in this
// order: Entries under the lease; the rank table and the list written
// (and With, in their pipeline); Front; the draw published with Fields;
// Published; Rest; the lease given back. Any of them may be nil.
type Apply struct {
	// Entries reads the frozen entries' ids (their order does not matter).
	Entries func(ctx context.Context) ([]string, error)
	// With adds the kind's own writes to the pipeline of the rank table
	// and the list (nothing of it is shown before the draw is published).
	With func(ctx context.Context, p redis.Pipeliner, d *Drawn)
	// Front is written before the draw is published.
	Front func(ctx context.Context, d *Drawn) error
	// Fields are the kind's own fields the draw is published with (name,
	// value, …).
	Fields func(d *Drawn) []any
	// Published is told once the draw is published (by this call, or
	// found published).
	Published func(d *Drawn)
	// Rest is written after the draw is published, before the lease is
	// given back: the kind marks its draw done then.
	Rest func(ctx context.Context, d *Drawn) error
}

// Run draws the frozen entries of the draw at k under seed and publishes
// it, holding the draw's lease for owner; one that finds another holding it
// leaves it be (nil Drawn, nil error). It may be run again after a process
// died halfway: it writes the same figures every time (they depend on the
// seed and the frozen entries alone), and the draw is published once.
func Run(ctx context.Context, c *rdb.Client, k rdb.DrawKeys, owner string, seed []byte, a Apply) (d *Drawn, err error) {
	ok, err := c.TakeLease(ctx, k.Lease, owner, Lease)
	if err != nil || !ok {
		return nil, err
	}
	defer func() {
		// Given back at the end, or at once on an error: another process
		// (or this one) takes it up from the start.
		if rerr := c.ReleaseLease(ctx, k.Lease, owner); err == nil && rerr != nil {
			err = rerr
		}
	}()
	ids, err := a.Entries(ctx)
	if err != nil {
		return nil, err
	}
	digest := Digest(ids)
	key := Key(seed, digest)
	d = &Drawn{Key: key, Digest: digest, IDs: ids, Entries: Rank(key, ids)}
	table, err := Ranks(d.Entries, Seq)
	if err != nil {
		return nil, err
	}
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, k.Ranks, table, 0)
		Parts(d.Entries, func(i int, part string) { p.Set(ctx, k.Ranked(i), part, 0) })
		if a.With != nil {
			a.With(ctx, p, d)
		}
		return nil
	})
	if err != nil {
		return nil, rdb.Interpret("draw", err)
	}
	if a.Front != nil {
		if err := a.Front(ctx, d); err != nil {
			return nil, err
		}
	}
	args := []any{hex.EncodeToString(digest), hex.EncodeToString(seed)}
	if a.Fields != nil {
		args = append(args, a.Fields(d)...)
	}
	if err := c.Run(ctx, rdb.Call{Script: publishScript, Keys: []string{k.Hash}, Args: args}).Err(); err != nil {
		return nil, rdb.Interpret("draw", err)
	}
	if a.Published != nil {
		a.Published(d)
	}
	if a.Rest != nil {
		if err := a.Rest(ctx, d); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// publishedFields are what Read reads of a draw's hash, in this order.
var publishedFields = []string{"commitment", "committedAt", "drawAt", "drawn", "seed", "entries", "digest", "nonce"}

// Read reads the public face of the draw at k: the commitment from the
// start; the seed, the nonce, the entries' count and digest once drawn,
// never before.
// drawAt is when the entries freeze until they have (the kind's plan says).
// ErrNone when nothing is committed.
func Read(ctx context.Context, c *rdb.Client, k rdb.DrawKeys, drawAt time.Time) (Published, error) {
	v, err := c.HMGet(ctx, k.Hash, publishedFields...).Result()
	if err != nil {
		return Published{}, rdb.Interpret("draw", err)
	}
	str := func(i int) string { s, _ := v[i].(string); return s }
	if str(0) == "" {
		return Published{}, ErrNone
	}
	out := Published{Commitment: str(0), CommittedAt: msTime(rdb.Num(v[1])), DrawAt: drawAt}
	if str(2) != "" {
		out.DrawAt = msTime(rdb.Num(v[2]))
	}
	if str(3) != "" {
		out.Drawn, out.DrawnAt = true, msTime(rdb.Num(v[3]))
		out.Seed, out.Entries, out.EntriesDigest, out.Nonce = str(4), rdb.Num(v[5]), str(6), str(7)
	}
	return out, nil
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// WriteEntries writes every entry of the drawn draw at k to w, in rank
// order, one id per line, part by part (a million entries are never held
// at once). ErrNone or
// ErrNotDrawn (nothing written) before.
func WriteEntries(ctx context.Context, c *rdb.Client, k rdb.DrawKeys, w io.Writer) error {
	v, err := c.HMGet(ctx, k.Hash, "commitment", "drawn", "entries").Result()
	if err != nil {
		return rdb.Interpret("draw entries", err)
	}
	switch {
	case v[0] == nil:
		return ErrNone
	case v[1] == nil:
		return ErrNotDrawn
	}
	n := rdb.Num(v[2])
	for i := 0; int64(i)*PartSize < n; i++ {
		part, err := c.Get(ctx, k.Ranked(i)).Result()
		if err != nil {
			return rdb.Interpret("draw entries", err)
		}
		if _, err := io.WriteString(w, part); err != nil {
			return err
		}
	}
	return nil
}

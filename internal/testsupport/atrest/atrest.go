// Package atrest reads everything a Redis server holds, every key of every
// database with its values (a hash's fields, a set's or a sorted set's
// members and scores, a list's items, a stream's entries), and finds the
// bearer credentials in it: a test's check of the rule "No bearer
// credential at rest" (DESIGN.md, Fair play, third round) on a running
// room. A credential is a JWT (the access pass, a site pass, a return
// token) or a ticket (whatever the caller's check accepts: the ticket
// codec with the room's secret), anywhere in a key or a value; and checks
// that a draw's seed was not at rest before the draw (CheckDerived).
package atrest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Item is one string Redis holds: a key's name, or one of its values.
type Item struct {
	DB   int
	Key  string
	Part string // "key", "value", "field", "member", "score", "item", "entry"
	Text string
}

// Dump reads every key of every database of the server c is a client of,
// with all their values. It reads a consistent enough picture for a test
// that stopped writing; keys that vanish while it reads are skipped.
func Dump(ctx context.Context, c *redis.Client) ([]Item, error) {
	info, err := c.Info(ctx, "keyspace").Result()
	if err != nil {
		return nil, fmt.Errorf("atrest: %w", err)
	}
	var out []Item
	for _, line := range strings.Split(info, "\n") {
		name, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "db") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(name, "db"))
		if err != nil {
			continue
		}
		o := *c.Options()
		o.DB = n
		db := redis.NewClient(&o)
		items, err := dumpDB(ctx, db, n)
		db.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

func dumpDB(ctx context.Context, c *redis.Client, db int) ([]Item, error) {
	var out []Item
	it := c.Scan(ctx, 0, "*", 1000).Iterator()
	for it.Next(ctx) {
		k := it.Val()
		add := func(part, text string) { out = append(out, Item{DB: db, Key: k, Part: part, Text: text}) }
		add("key", k)
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			return nil, fmt.Errorf("atrest: type %s: %w", k, err)
		}
		switch typ {
		case "string":
			v, err := c.Get(ctx, k).Result()
			if err == nil {
				add("value", v)
			}
		case "hash":
			m, err := c.HGetAll(ctx, k).Result()
			if err != nil {
				return nil, fmt.Errorf("atrest: %s: %w", k, err)
			}
			for f, v := range m {
				add("field", f)
				add("value", v)
			}
		case "list":
			l, err := c.LRange(ctx, k, 0, -1).Result()
			if err != nil {
				return nil, fmt.Errorf("atrest: %s: %w", k, err)
			}
			for _, v := range l {
				add("item", v)
			}
		case "set":
			l, err := c.SMembers(ctx, k).Result()
			if err != nil {
				return nil, fmt.Errorf("atrest: %s: %w", k, err)
			}
			for _, v := range l {
				add("member", v)
			}
		case "zset":
			l, err := c.ZRangeWithScores(ctx, k, 0, -1).Result()
			if err != nil {
				return nil, fmt.Errorf("atrest: %s: %w", k, err)
			}
			for _, z := range l {
				add("member", fmt.Sprint(z.Member))
				add("score", strconv.FormatFloat(z.Score, 'f', -1, 64))
			}
		case "stream":
			l, err := c.XRange(ctx, k, "-", "+").Result()
			if err != nil {
				return nil, fmt.Errorf("atrest: %s: %w", k, err)
			}
			for _, m := range l {
				for f, v := range m.Values {
					add("field", f)
					add("entry", fmt.Sprint(v))
				}
			}
		case "none": // gone meanwhile
		default:
			return nil, fmt.Errorf("atrest: %s: type %s not read", k, typ)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("atrest: scan: %w", err)
	}
	return out, nil
}

// Finding is a credential found at rest.
type Finding struct {
	Item
	Kind  string // "jwt" or "ticket"
	Found string
}

func (f Finding) String() string {
	return fmt.Sprintf("%s in db %d key %q (%s): %.60s", f.Kind, f.DB, f.Key, f.Part, f.Found)
}

var (
	// run is a stretch of base64url long enough to hold a ticket (the
	// shortest is 1+1+16+1+1 bytes and a 16-byte tag: 48 characters; 20
	// leaves room for any other token worth a look).
	run = regexp.MustCompile(`[A-Za-z0-9_-]{20,}`)
	// jwt is three base64url parts, as a compact JWS is.
	jwt = regexp.MustCompile(`[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)
)

// Find returns every credential in items: every JWT (three base64url parts
// whose first is a JSON header naming an alg), and every stretch of
// base64url that ticket accepts (nil: none looked for).
func Find(items []Item, ticket func(string) bool) []Finding {
	var out []Finding
	for _, it := range items {
		for _, m := range jwt.FindAllString(it.Text, -1) {
			if isJWT(m) {
				out = append(out, Finding{Item: it, Kind: "jwt", Found: m})
			}
		}
		if ticket == nil {
			continue
		}
		for _, m := range run.FindAllString(it.Text, -1) {
			if ticket(m) {
				out = append(out, Finding{Item: it, Kind: "ticket", Found: m})
			}
		}
	}
	return out
}

func isJWT(s string) bool {
	head, _, _ := strings.Cut(s, ".")
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(head, "="))
	if err != nil {
		return false
	}
	var h map[string]any
	if json.Unmarshal(b, &h) != nil {
		return false
	}
	_, ok := h["alg"]
	return ok
}

// Draw is a draw as it is published once made (the lottery, the
// selection): its seed, nonce and commitment, hex.
type Draw struct {
	Event, Kind             string // the kind: "lottery" or "selection"
	Seed, Nonce, Commitment string
}

// CheckDerived checks the rule "the seed is derived, never stored before
// the draw" (DESIGN.md, Fair play, third round) on d and before, what
// Redis held before it was drawn (Dump): the seed was nowhere in it, in
// hex or raw; the nonce was; the seed is HMAC-SHA256(secret, "waitroom
// draw\n" ‖ event ‖ "\n" ‖ kind ‖ "\n" ‖ nonce), worked out here on its
// own; and the commitment is its SHA-256. The error names the first
// breach.
func CheckDerived(before []Item, secret []byte, d Draw) error {
	seed, err := hex.DecodeString(d.Seed)
	if err != nil || len(seed) != 32 {
		return fmt.Errorf("published seed %q: %v", d.Seed, err)
	}
	for _, it := range before {
		if strings.Contains(strings.ToLower(it.Text), d.Seed) || strings.Contains(it.Text, string(seed)) {
			return fmt.Errorf("the seed was in Redis before the draw: key %q (%s)", it.Key, it.Part)
		}
	}
	// What was in Redis: the nonce, which gives the seed only with the
	// secret the config holds.
	nonce, err := hex.DecodeString(d.Nonce)
	if err != nil || len(nonce) != 16 {
		return fmt.Errorf("published nonce %q: %v", d.Nonce, err)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("waitroom draw\n" + d.Event + "\n" + d.Kind + "\n"))
	m.Write(nonce)
	if want := m.Sum(nil); !bytes.Equal(seed, want) {
		return fmt.Errorf("published seed %x; want HMAC-SHA256(draw secret, event, kind, nonce) %x", seed, want)
	}
	if sum := sha256.Sum256(seed); hex.EncodeToString(sum[:]) != d.Commitment {
		return fmt.Errorf("SHA-256 of the seed %x; want the commitment %s", sum, d.Commitment)
	}
	for _, it := range before {
		if strings.Contains(it.Text, d.Nonce) {
			return nil
		}
	}
	return fmt.Errorf("the nonce was not in Redis before the draw: the seed came from elsewhere")
}

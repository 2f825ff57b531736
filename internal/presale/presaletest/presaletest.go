// Package presaletest writes a presale's registrations and checks its
// selection for tests, under rdb's key names, as queuetest reads a line.
package presaletest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
)

// Register writes n registrations of event straight into Redis, as the
// registration script writes them (the account's entry, the log, the
// sequence), in batches: account "account-<seq>", registration id
// "<seq in base 36>.<seq, 16 digits>". Registration must be open and the
// selection committed (an admitter's first step does both).
func Register(ctx context.Context, c redis.UniversalClient, event string, n int) error {
	const batch = 10_000
	k := rdb.KeysOf(event)
	for from := 1; from <= n; from += batch {
		fields := make([]any, 0, 2*batch)
		log := make([]any, 0, batch)
		for seq := from; seq < min(from+batch, n+1); seq++ {
			acct, id := Account(seq), strconv.FormatInt(int64(seq), 36)+"."+fmt.Sprintf("%016d", seq)
			fields = append(fields, acct, id)
			log = append(log, id+" "+acct)
		}
		if err := c.HSet(ctx, k.PresaleAccounts, fields...).Err(); err != nil {
			return err
		}
		if err := c.RPush(ctx, k.PresaleLog, log...).Err(); err != nil {
			return err
		}
	}
	return c.HSet(ctx, k.Presale, "seq", n).Err()
}

// Account is the account of Register's registration seq.
func Account(seq int) string { return "account-" + strconv.Itoa(seq) }

// CheckDraw checks a drawn selection, or a drawn lottery, from what it
// publishes alone, the recipe of docs/QUEUE.md written without package
// draw: the seed against its commitment, the digest of the list (its ids
// sorted, one per line), and the list in the order of each id's draw,
// HMAC-SHA256 under SHA-256(seed ‖ digest), lowest first, the 32 bytes
// compared whole, then the ids. list is the published list (GET
// …/selection/entries or …/lottery/entries), one id a line.
func CheckDraw(seedHex, commitment, digestHex string, list []byte) error {
	ids := strings.Split(strings.TrimSuffix(string(list), "\n"), "\n")
	seed, err := hex.DecodeString(seedHex)
	if err != nil || len(seed) == 0 {
		return fmt.Errorf("seed %q: not hex", seedHex)
	}
	if sum := sha256.Sum256(seed); hex.EncodeToString(sum[:]) != commitment {
		return fmt.Errorf("SHA-256(seed) = %x, commitment %s", sum, commitment)
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	digest := sha256.Sum256([]byte(strings.Join(sorted, "\n") + "\n"))
	if hex.EncodeToString(digest[:]) != digestHex {
		return fmt.Errorf("the list's digest %x, published %s", digest, digestHex)
	}
	key := sha256.Sum256(append(seed, digest[:]...))
	draw := func(id string) []byte {
		m := hmac.New(sha256.New, key[:])
		m.Write([]byte(id))
		return m.Sum(nil)
	}
	prev := draw(ids[0])
	for i := 1; i < len(ids); i++ {
		d := draw(ids[i])
		if c := bytes.Compare(prev, d); c > 0 || (c == 0 && ids[i-1] > ids[i]) {
			return fmt.Errorf("rank %d (%s) draws above rank %d (%s)", i, ids[i-1], i+1, ids[i])
		}
		prev = d
	}
	if bytes.Count(list, []byte("\n")) != len(ids) {
		return fmt.Errorf("the list is not one id a line")
	}
	return nil
}

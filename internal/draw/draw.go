// Package draw is the committed draw anyone can check, shared by the
// pre-queue's lottery (package queue) and the presale's selection (package
// presale): DESIGN.md "Transparency" and "Presale", docs/QUEUE.md.
//
//   - Before any entry exists, a 32-byte seed is fixed and its SHA-256
//     published: the commitment. The seed is HMAC-SHA256 of the draw
//     secret (auth.draw_secret) over the event, the kind and a random
//     nonce; Redis keeps only the nonce and the commitment until the draw
//     (Secret.Commit, secret.go), so no reader of Redis knows the seed
//     before it is published.
//   - The entries freeze at a time fixed in advance. Their digest is SHA-256
//     of their ids sorted bytewise, each followed by "\n" (Digest).
//   - The draw's key is SHA-256(seed ‖ digest) (Key): it depends on every
//     entry, so one who knew the seed before the freeze still cannot tell
//     which of its entries will draw well.
//   - An entry's draw is HMAC-SHA256(key, id) (Of); entries are ranked by
//     their draws compared whole, all 32 bytes, lowest first, and entries
//     whose draws are equal by id bytewise (Rank): what DESIGN.md says and
//     what anyone checking computes. The lottery's line follows the ranks
//     (Score is a rank's place in a Redis sorted set), so its order is the
//     published one even for two draws that share their first 52 bits.
//   - Once drawn, the seed, the nonce, the digest and every id in rank
//     order are published, so anyone can recompute all of it.
//
// The lifecycle in Redis is written here once for both kinds (lua.go,
// lifecycle.go): the commitment and the freeze in Lua (draw_step, which
// each kind's step script calls with its own times and entries), the draw
// itself under a lease and its publication in Go (Run, with what the kind
// writes besides as Apply), and the readers (Read, WriteEntries). Keys come
// from rdb.DrawKeys; scripts run through rdb.Client.
package draw

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/waitroom/waitroom/internal/line"
)

// Published is what a committed draw shows anyone: the line's word
// (line.Draw), the lottery's route and the presale's selection answer it.
type Published = line.Draw

// Digest is SHA-256 of ids sorted bytewise, each followed by "\n". ids is
// left as it was.
func Digest(ids []string) []byte {
	if slices.IsSorted(ids) {
		return digestSorted(ids) // the selection's registrations come sorted
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	return digestSorted(sorted)
}

func digestSorted(sorted []string) []byte {
	h := sha256.New()
	b := bufio.NewWriterSize(h, 64<<10)
	for _, id := range sorted {
		b.WriteString(id)
		b.WriteByte('\n')
	}
	b.Flush()
	return h.Sum(nil)
}

// Key is the draw's key, SHA-256(seed ‖ digest), from their bytes.
func Key(seed, digest []byte) []byte {
	k := sha256.Sum256(append(append(make([]byte, 0, len(seed)+len(digest)), seed...), digest...))
	return k[:]
}

// KeyHex is Key from the seed and the digest as published (hex).
func KeyHex(seedHex, digestHex string) ([]byte, error) {
	seed, err := hex.DecodeString(seedHex)
	if err != nil || len(seed) != 32 {
		return nil, fmt.Errorf("draw: seed %q: %v", seedHex, err)
	}
	digest, err := hex.DecodeString(digestHex)
	if err != nil || len(digest) != sha256.Size {
		return nil, fmt.Errorf("draw: digest %q: %v", digestHex, err)
	}
	return Key(seed, digest), nil
}

// Of is the draw of the entry id under key: HMAC-SHA256(key, id).
func Of(key []byte, id string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	return m.Sum(nil)
}

// Score is the lottery line's score of rank (1 = first): rank − 2^53, so
// in [−2^53+1, −2^53+2^32]: exact in a float64 (a sorted set's score), in
// rank order, and below every other score the line gives (a pre-queue
// place's before the draw is in [−2^52, −1], a place after opening's from
// 1 up: docs/QUEUE.md). By rank rather than by the draw's leading bits: a
// float64 holds 53 bits of a 256-bit draw, and two draws that share them
// would be ordered by id in the line.
func Score(rank int64) int64 { return rank - 1<<53 }

// RankOfScore is the rank a drawn score stands for, or 0 for any other.
func RankOfScore(score int64) int64 {
	if score <= -1<<53 || score > Score(1<<32) {
		return 0
	}
	return score + 1<<53
}

// Entry is one entry as the draw ranks it.
type Entry struct {
	Prefix uint64 // the draw's first 8 bytes, big-endian: its order, but for ties
	ID     string
	Index  int // its place in the ids Rank was given
}

// Rank computes every entry's draw under key (on every core) and sorts
// them: lowest draw first, the 32 bytes compared whole, then by id.
func Rank(key []byte, ids []string) []Entry {
	out := make([]Entry, len(ids))
	workers := runtime.GOMAXPROCS(0)
	per := max((len(ids)+workers-1)/workers, 1)
	var wg sync.WaitGroup
	for from := 0; from < len(ids); from += per {
		wg.Add(1)
		go func(part []string, into []Entry, base int) {
			defer wg.Done()
			m := hmac.New(sha256.New, key)
			var sum [sha256.Size]byte
			for i, id := range part {
				m.Reset()
				m.Write([]byte(id))
				into[i] = Entry{Prefix: binary.BigEndian.Uint64(m.Sum(sum[:0])), ID: id, Index: base + i}
			}
		}(ids[from:min(from+per, len(ids))], out[from:], from)
	}
	wg.Wait()
	order(out, key)
	return out
}

// order sorts entries by their draws under key, lowest first, and equal
// draws by id. The first 8 bytes decide but for a tie (two entries of a
// million share them about once in 2^25 draws): then the whole draws are
// computed again and compared.
func order(es []Entry, key []byte) {
	slices.SortFunc(es, func(a, b Entry) int {
		if c := cmp.Compare(a.Prefix, b.Prefix); c != 0 {
			return c
		}
		return Compare(Of(key, a.ID), Of(key, b.ID), a.ID, b.ID)
	})
}

// Compare is the draw's order of two entries, from their draws (HMACs)
// and ids: the draws bytewise, all 32 bytes, then the ids bytewise.
func Compare(drawA, drawB []byte, idA, idB string) int {
	if c := bytes.Compare(drawA, drawB); c != 0 {
		return c
	}
	return strings.Compare(idA, idB)
}

// Ranks is the rank table of entries (in rank order) as the scripts read
// it with BITFIELD_RO u32 #seq: a big-endian u32 per sequence number, the
// entry's rank (1 = first), 0 where no entry has that number. seq gives an
// entry's sequence number (the number in front of its id).
func Ranks(entries []Entry, seq func(id string) (int64, bool)) ([]byte, error) {
	var last int64
	seqs := make([]int64, len(entries))
	for i, e := range entries {
		n, ok := seq(e.ID)
		if !ok || n < 0 || n > 1<<32 {
			return nil, fmt.Errorf("draw: entry %q has no sequence number", e.ID)
		}
		seqs[i], last = n, max(last, n)
	}
	table := make([]byte, 4*(last+1))
	for i, n := range seqs {
		binary.BigEndian.PutUint32(table[4*n:], uint32(i+1))
	}
	return table, nil
}

// Seq is the sequence number in front of an id ("<seq base 36>.<random>":
// a ticket's or a registration's).
func Seq(id string) (int64, bool) {
	p, _, ok := strings.Cut(id, ".")
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseInt(p, 36, 64)
	return seq, err == nil
}

// PartSize is how many ids one part of a published list holds: a list of
// a million ids is written, and streamed, a part at a time.
const PartSize = 10_000

// Parts cuts entries (in rank order) into the published list's parts:
// part i is ids PartSize·i … PartSize·(i+1)-1, each followed by "\n".
func Parts(entries []Entry, each func(i int, part string)) {
	var b strings.Builder
	for i := 0; i*PartSize < len(entries); i++ {
		b.Reset()
		for _, e := range entries[i*PartSize : min((i+1)*PartSize, len(entries))] {
			b.WriteString(e.ID)
			b.WriteByte('\n')
		}
		each(i, b.String())
	}
}

// Dedupe sorts ids and drops repeats (a Redis SCAN may return an element
// twice), in place.
func Dedupe(ids []string) []string {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// DigestSorted is Digest of ids already sorted bytewise (Dedupe's result).
func DigestSorted(ids []string) []byte { return digestSorted(ids) }

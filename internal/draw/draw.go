// Package draw is the committed draw anyone can check, shared by the
// pre-queue's lottery (package queue) and the presale's selection (package
// presale): DESIGN.md "Transparency" and "Presale", docs/QUEUE.md.
//
//   - Before any entry exists, a 32-byte seed is drawn (crypto/rand) and
//     its SHA-256 published: the commitment (NewSeed).
//   - The entries freeze at a time fixed in advance. Their digest is SHA-256
//     of their ids sorted bytewise, each followed by "\n" (Digest).
//   - The draw's key is SHA-256(seed ‖ digest) (Key): it depends on every
//     entry, so one who knew the seed before the freeze still cannot tell
//     which of its entries will draw well.
//   - An entry's draw is HMAC-SHA256(key, id) (Of); entries are ranked by
//     the draw's first 52 bits, lowest first, ties by id bytewise (Rank):
//     the order a Redis sorted set keeps for Score, so the lottery's line
//     and its published ranks agree. Two entries of a million share 52 bits
//     about once in ten thousand draws; the tie rule makes even that exact.
//   - Once drawn, the seed, the digest and every id in rank order are
//     published, so anyone can recompute all of it.
package draw

import (
	"bufio"
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Published is what a committed draw shows anyone: the commitment from the
// start; the seed, the entries' count and digest once drawn, never before.
type Published struct {
	Commitment  string // hex SHA-256 of the seed
	CommittedAt time.Time
	DrawAt      time.Time // when the entries freeze (zero: unknown)
	// Seed, EntriesDigest and Entries are shown once drawn, never before.
	Seed          string // hex
	EntriesDigest string // hex SHA-256 of the entries' ids, sorted, each followed by "\n"
	Entries       int64
	Drawn         bool
	DrawnAt       time.Time
}

// NewSeed draws a seed and its commitment, both hex.
func NewSeed() (seedHex, commitmentHex string, err error) {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return "", "", fmt.Errorf("draw: seed: %w", err)
	}
	sum := sha256.Sum256(seed[:])
	return hex.EncodeToString(seed[:]), hex.EncodeToString(sum[:]), nil
}

// Digest is SHA-256 of ids sorted bytewise, each followed by "\n". ids is
// left as it was.
func Digest(ids []string) []byte {
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

// Score is the order of a draw as one integer: its first 52 bits, less
// 2^53, so in [-2^53, -2^52-1]: exact in a float64 (a sorted set's score),
// in the draw's order, and below every other score the line gives (a
// pre-queue place's before the draw is in [-2^52, -1], a place after
// opening's from 1 up: docs/QUEUE.md).
func Score(draw []byte) int64 {
	return int64(binary.BigEndian.Uint64(draw[:8])>>12) - 1<<53
}

// ScoreOf is the Score of the entry id under key.
func ScoreOf(key []byte, id string) int64 { return Score(Of(key, id)) }

// Entry is one entry as the draw ranks it.
type Entry struct {
	Score int64
	ID    string
	Index int // its place in the ids Rank was given
}

// Rank computes every entry's draw under key (on every core) and sorts
// them: lowest Score first, ties by id bytewise.
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
				into[i] = Entry{Score: scoreWith(m, id, &sum), ID: id, Index: base + i}
			}
		}(ids[from:min(from+per, len(ids))], out[from:], from)
	}
	wg.Wait()
	order(out)
	return out
}

// order sorts entries lowest Score first, ties by id bytewise.
func order(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		if c := cmp.Compare(a.Score, b.Score); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// scoreWith is ScoreOf with a keyed HMAC state used again (Reset restores
// the key's pads without hashing them again).
func scoreWith(m hash.Hash, id string, sum *[sha256.Size]byte) int64 {
	m.Reset()
	m.Write([]byte(id))
	return Score(m.Sum(sum[:0]))
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

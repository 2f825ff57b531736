package draw

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The recipe docs/QUEUE.md gives, spelled out with the standard library
// alone: what anyone checking a draw computes.
func TestRecipe(t *testing.T) {
	secret := Secret("a draw secret of thirty-two bytes")
	nonceHex, commitment, err := secret.Commit("premiere", Lottery)
	if err != nil {
		t.Fatal(err)
	}
	nonce, _ := hex.DecodeString(nonceHex)
	if len(nonce) != NonceSize {
		t.Fatalf("nonce %s: want %d bytes", nonceHex, NonceSize)
	}
	m := hmac.New(sha256.New, secret)
	m.Write(append([]byte("waitroom draw\npremiere\nlottery\n"), nonce...))
	raw := m.Sum(nil)
	if got, err := secret.SeedOf("premiere", Lottery, Step{Nonce: nonce, Commitment: commitment}); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("seed %x (%v); want HMAC-SHA256(secret, \"waitroom draw\\npremiere\\nlottery\\n\" ‖ nonce) %x", got, err, raw)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != commitment {
		t.Fatalf("commitment %s is not SHA-256 of the seed", commitment)
	}
	seed := hex.EncodeToString(raw)
	ids := []string{"3.c", "1.a", "2.b", "10.z"}
	digest := Digest(ids)
	if want := sha256.Sum256([]byte("1.a\n10.z\n2.b\n3.c\n")); !bytes.Equal(digest, want[:]) {
		t.Fatalf("digest %x, want %x", digest, want)
	}
	if ids[0] != "3.c" {
		t.Fatal("Digest reordered its argument")
	}
	key, err := KeyHex(seed, hex.EncodeToString(digest))
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(append(raw, digest...)); !bytes.Equal(key, want[:]) {
		t.Fatalf("key %x, want SHA-256(seed ‖ digest) %x", key, want)
	}
	ranked := Rank(key, ids)
	for i, e := range ranked {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(e.ID))
		d := m.Sum(nil)
		if e.Prefix != binary.BigEndian.Uint64(d[:8]) {
			t.Fatalf("%s: prefix %x is not the HMAC's first 8 bytes", e.ID, e.Prefix)
		}
		if i > 0 && bytes.Compare(Of(key, ranked[i-1].ID), d) >= 0 {
			t.Fatalf("rank %d (%s) does not draw above rank %d", i+1, e.ID, i)
		}
	}
}

// A seed is its event's and its kind's: the same nonce under another event
// or kind, or another secret, gives another seed, which its commitment
// refuses; no secret, no seed.
func TestSeedOfChecksTheCommitment(t *testing.T) {
	secret := Secret("a draw secret of thirty-two bytes")
	nonceHex, commitment, err := secret.Commit("tour", Selection)
	if err != nil {
		t.Fatal(err)
	}
	nonce, _ := hex.DecodeString(nonceHex)
	st := Step{Nonce: nonce, Commitment: commitment}
	if _, err := secret.SeedOf("tour", Selection, st); err != nil {
		t.Fatalf("its own seed: %v", err)
	}
	for name, try := range map[string]func() error{
		"another event": func() error { _, err := secret.SeedOf("tour2", Selection, st); return err },
		"another kind":  func() error { _, err := secret.SeedOf("tour", Lottery, st); return err },
		"another secret": func() error {
			_, err := Secret("another secret of thirty-two bytes").SeedOf("tour", Selection, st)
			return err
		},
		"no nonce": func() error { _, err := secret.SeedOf("tour", Selection, Step{Commitment: commitment}); return err },
	} {
		if try() == nil {
			t.Errorf("%s: a seed that does not match the commitment was taken", name)
		}
	}
	if _, _, err := Secret(nil).Commit("tour", Selection); !errors.Is(err, ErrNoSecret) {
		t.Errorf("commit without a secret: %v; want ErrNoSecret", err)
	}
}

func TestKeyHexRefusesBadInput(t *testing.T) {
	good := strings.Repeat("ab", 32)
	for _, c := range [][2]string{{"", good}, {good, ""}, {"zz" + good[2:], good}, {good[:62], good}, {good, good + "00"}} {
		if _, err := KeyHex(c[0], c[1]); err == nil {
			t.Errorf("KeyHex(%q, %q) took it", c[0], c[1])
		}
	}
}

// Equal draws (never seen: it takes two ids of one HMAC) sort by id; the
// line's score is the rank's, in rank order, below every other score.
func TestCompareAndScore(t *testing.T) {
	d := []byte{1, 2, 3}
	for _, c := range []struct {
		a, b   []byte
		ia, ib string
		want   int
	}{
		{d, d, "a", "b", -1}, {d, d, "b", "a", 1}, {d, d, "a", "a", 0},
		{[]byte{1, 2, 2}, d, "z", "a", -1}, {[]byte{1, 2, 4}, d, "a", "z", 1},
	} {
		if got := Compare(c.a, c.b, c.ia, c.ib); got != c.want {
			t.Errorf("Compare(%x, %x, %s, %s) = %d; want %d", c.a, c.b, c.ia, c.ib, got, c.want)
		}
	}
	for _, rank := range []int64{1, 2, 1_000_000, 1 << 32} {
		s := Score(rank)
		if s >= -1<<52 || float64(s) != float64(s+1)-1 || RankOfScore(s) != rank || Score(rank-1) >= s {
			t.Errorf("Score(%d) = %d: not below the pre-queue's scores, not exact, or not in rank order", rank, s)
		}
	}
	for _, s := range []int64{-1 << 53, -1 << 52, -1, 0, 1, Score(1<<32) + 1} {
		if r := RankOfScore(s); r != 0 {
			t.Errorf("RankOfScore(%d) = %d; want 0 (no drawn score)", s, r)
		}
	}
}

func TestRanksAndParts(t *testing.T) {
	var entries []Entry
	for _, n := range []int{7, 2, 9, 4} {
		entries = append(entries, Entry{ID: strconv.FormatInt(int64(n), 36) + ".x"})
	}
	seq := func(id string) (int64, bool) {
		p, _, _ := strings.Cut(id, ".")
		n, err := strconv.ParseInt(p, 36, 64)
		return n, err == nil
	}
	table, err := Ranks(entries, seq)
	if err != nil {
		t.Fatal(err)
	}
	if len(table) != 4*10 {
		t.Fatalf("table of %d bytes, want 40 (u32 for 0…9)", len(table))
	}
	for n, want := range map[int]uint32{7: 1, 2: 2, 9: 3, 4: 4, 0: 0, 3: 0} {
		if got := binary.BigEndian.Uint32(table[4*n:]); got != want {
			t.Errorf("rank of #%d = %d, want %d", n, got, want)
		}
	}
	if _, err := Ranks([]Entry{{ID: "!.x"}}, seq); err == nil {
		t.Error("an id without a sequence number was ranked")
	}

	many := make([]Entry, PartSize+3)
	for i := range many {
		many[i].ID = strconv.Itoa(i)
	}
	var parts []string
	Parts(many, func(i int, part string) {
		if i != len(parts) {
			t.Fatalf("part %d out of order", i)
		}
		parts = append(parts, part)
	})
	if len(parts) != 2 || strings.Count(parts[0], "\n") != PartSize || parts[1] != fmt.Sprintf("%d\n%d\n%d\n", PartSize, PartSize+1, PartSize+2) {
		t.Fatalf("parts: %d, last %q", len(parts), parts[len(parts)-1])
	}
}

func TestDedupe(t *testing.T) {
	got := Dedupe([]string{"b", "a", "b", "c", "a"})
	if strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("got %v", got)
	}
	if !bytes.Equal(DigestSorted(got), Digest([]string{"c", "b", "a"})) {
		t.Fatal("DigestSorted differs from Digest")
	}
}

// Ties are broken as written (DESIGN.md, Fair play, third round): two
// entries whose draws share their first 52 bits (planted here: a real pair
// needs some 2^26 draws to find) are ordered by their full 32-byte draws,
// and only entries whose draws are equal by their ids.
func TestTiesAreBrokenByTheFullHMAC(t *testing.T) {
	key := []byte("a key")
	// Two ids whose id order is the opposite of their draws' order.
	a, b := "1.a", "1.b"
	for i := 0; bytes.Compare(Of(key, a), Of(key, b)) < 0; i++ {
		b = fmt.Sprintf("1.b%d", i)
	}
	es := []Entry{{Prefix: 5, ID: a}, {Prefix: 5, ID: b}, {Prefix: 4, ID: "1.z"}}
	order(es, key)
	es = es[1:]
	if es[0].ID != b {
		t.Fatalf("a tie in the first 52 bits ordered %s, %s; want %s first: its HMAC is lower (%x < %x)", es[0].ID, es[1].ID, b, Of(key, b), Of(key, a))
	}
}

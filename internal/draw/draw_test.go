package draw

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The recipe docs/QUEUE.md gives, spelled out with the standard library
// alone: what anyone checking a draw computes.
func TestRecipe(t *testing.T) {
	seed, commitment, err := NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := hex.DecodeString(seed)
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != commitment {
		t.Fatalf("commitment %s is not SHA-256 of the seed", commitment)
	}
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
		if e.Score != int64(binary.BigEndian.Uint64(d[:8])>>12)-1<<53 {
			t.Fatalf("%s: score %d is not the HMAC's first 52 bits", e.ID, e.Score)
		}
		if i > 0 && bytes.Compare(Of(key, ranked[i-1].ID), d) >= 0 {
			t.Fatalf("rank %d (%s) does not draw above rank %d", i+1, e.ID, i)
		}
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

// Ties in 52 bits sort by id, as a sorted set sorts equal scores.
func TestOrderTiesById(t *testing.T) {
	es := []Entry{{Score: 5, ID: "b"}, {Score: 5, ID: "a"}, {Score: -3, ID: "z"}}
	order(es)
	if fmt.Sprint(es) != "[{-3 z 0} {5 a 0} {5 b 0}]" {
		t.Fatalf("got %v", es)
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

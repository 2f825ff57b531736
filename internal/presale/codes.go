package presale

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/waitroom/waitroom/internal/rdb"
)

// Access codes (admission.codes: required): a new place spends one use of
// a code in the join's own script (CodeLua). Codes are stored only as
// HMAC-SHA256(key, "waitroom-code\0" + event + "\0" + code), the code
// normalized: a copy of Redis gives nobody a code.

// Limits of the operators' requests.
const (
	MaxCodesPerRequest = 10_000
	MaxCodeUses        = 1_000_000
	MaxCodeLen         = 64
)

// ErrBadCode: a given code that is empty or too long once normalized, or
// holds other than letters and digits.
var ErrBadCode = errors.New("presale: a code is 1 to 64 letters and digits (dashes and spaces are ignored)")

// NormalizeCode is the code as stored and compared: trimmed, upper case,
// without dashes and spaces (a fan may type "fanclub-2026 " for
// "FANCLUB-2026"). ok is false for a code that cannot be one.
func NormalizeCode(code string) (string, bool) {
	var b strings.Builder
	for _, r := range strings.ToUpper(strings.TrimSpace(code)) {
		switch {
		case r == '-' || r == ' ':
		case (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		default:
			return "", false
		}
		if b.Len() > MaxCodeLen {
			return "", false
		}
	}
	return b.String(), b.Len() > 0
}

// CodeHash is the code as the join script looks it up: "" for none (the
// join is then refused code_required), "-" for one that cannot be a code
// (no such code: invalid_code).
func (s *Store) CodeHash(event, code string) string {
	if strings.TrimSpace(code) == "" {
		return ""
	}
	n, ok := NormalizeCode(code)
	if !ok {
		return "-"
	}
	m := hmac.New(sha256.New, s.codeKey)
	m.Write([]byte("waitroom-code\x00" + event + "\x00" + n))
	return hex.EncodeToString(m.Sum(nil))
}

// codeAlphabet: no 0/O, 1/I/L, so a code read aloud or typed is one code.
const codeAlphabet = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"

// NewCodes makes count random codes of uses each, and returns them: shown
// once, stored only hashed. A code is 12 characters of codeAlphabet
// (about 59 bits) written in three groups, XXXX-XXXX-XXXX.
func (s *Store) NewCodes(ctx context.Context, event string, count, uses int) ([]string, error) {
	codes := make([]string, count)
	raw := make([]byte, 12)
	for i := range codes {
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		var b strings.Builder
		for j, x := range raw {
			if j > 0 && j%4 == 0 {
				b.WriteByte('-')
			}
			b.WriteByte(codeAlphabet[int(x)%len(codeAlphabet)])
		}
		codes[i] = b.String()
	}
	return codes, s.AddCodes(ctx, event, codes, uses)
}

// AddCodes adds the given codes with uses each (a code given again gets
// that many more uses). ErrBadCode, nothing added, if one cannot be a code.
func (s *Store) AddCodes(ctx context.Context, event string, codes []string, uses int) error {
	hashes := make([]string, len(codes))
	for i, c := range codes {
		if _, ok := NormalizeCode(c); !ok {
			return ErrBadCode
		}
		hashes[i] = s.CodeHash(event, c)
	}
	k := rdb.KeysOf(event)
	_, err := s.c.Run(ctx, rdb.Call{Script: addCodesScript, Keys: []string{k.Codes, k.CodesInfo}, Args: append([]any{uses}, rdb.Args(hashes)...)}).Result()
	return rdb.Interpret("codes", err)
}

// addCodesScript adds codes' uses, and counts the codes and the uses.
//
// KEYS: 1 codes, 2 codes info
// ARGV: 1 uses, then the codes' hashes
var addCodesScript = lua.Script("add_codes", `
local uses, new = tonumber(ARGV[1]), 0
for i = 2, #ARGV do
  new = new + 1 - redis.call('HEXISTS', KEYS[1], ARGV[i])
  redis.call('HINCRBY', KEYS[1], ARGV[i], uses)
end
redis.call('HINCRBY', KEYS[2], 'codes', new)
redis.call('HINCRBY', KEYS[2], 'uses', uses * (#ARGV - 1))
return new
`)

// CodeCounts are the codes' counts (never a code).
type CodeCounts struct {
	Codes, Uses, Used int64
}

// CodeCounts reads event's codes' counts.
func (s *Store) CodeCounts(ctx context.Context, event string) (CodeCounts, error) {
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).CodesInfo, "codes", "uses", "used").Result()
	if err != nil {
		return CodeCounts{}, rdb.Interpret("codes", err)
	}
	return CodeCounts{Codes: rdb.Num(v[0]), Uses: rdb.Num(v[1]), Used: rdb.Num(v[2])}, nil
}

package line_test

// The ticket's fuzz target, on the exported API only (Codec.Parse, and the
// parsed Ticket's ID and Account): one file to adapt when the ticket's
// package or format moves.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"regexp"
	"testing"

	"github.com/waitroom/waitroom/internal/line"
)

// fuzzSecret is the ticket secret of the fuzz target.
const fuzzSecret = "fuzz-ticket-secret-0123456789abcdef"

// signTicket is a ticket of event with payload, signed as the ticket's
// documented format says (ticket.go): base64url(payload ‖ tag), tag =
// HMAC-SHA256(secret, "waitroom-ticket\x00" ‖ event ‖ "\x00" ‖ payload)[:16].
// Signing the fuzzer's payloads takes them past the tag, to the parser.
func signTicket(event string, payload []byte) string {
	m := hmac.New(sha256.New, []byte(fuzzSecret))
	m.Write([]byte("waitroom-ticket\x00" + event + "\x00"))
	m.Write(payload)
	return base64.RawURLEncoding.EncodeToString(append(append([]byte{}, payload...), m.Sum(nil)[:16]...))
}

// ticketPayload is a well-formed payload: version 1 (no account) or 2.
func ticketPayload(seq, joinedAt, eta uint64, account string) []byte {
	b := []byte{1}
	if account != "" {
		b[0] = 2
	}
	b = binary.AppendUvarint(b, seq)
	for i := range 16 {
		b = append(b, byte(i*29+7))
	}
	b = binary.AppendUvarint(b, joinedAt)
	b = binary.AppendUvarint(b, eta)
	if account != "" {
		b = binary.AppendUvarint(b, uint64(len(account)))
		b = append(b, account...)
	}
	return b
}

// ticketIDPattern is a ticket id (the access JWT's sub, the Redis member).
var ticketIDPattern = regexp.MustCompile(`^[0-9a-z]{1,13}\.[A-Za-z0-9_-]{22}$`)

// FuzzTicket: a ticket is the fan's word (cookie, header, URL), parsed once
// where it comes in (the gateway). Whatever the string, Parse never panics,
// and refuses (ErrInvalidTicket, and no Ticket) anything but an authentic
// ticket of that event with a well-formed id and an account of at most 64
// bytes, which stops being accepted once any character of it changes or it
// is shown for another event. The fuzzer's payloads are also signed, so
// that the parser behind the tag is fuzzed too.
func FuzzTicket(f *testing.F) {
	examples := []struct {
		event   string
		payload []byte
	}{
		{"premiere", ticketPayload(1, 1_764_580_000_000, 0, "")},
		{"premiere", ticketPayload(123456, 1_764_580_000_000, 90_001, "")},
		{"live", ticketPayload(1<<40, 1_764_580_000_000, 1, "acct-42")},
		{"live", ticketPayload(7, 0, 0, "user@example.com")},
		{"x", ticketPayload(1<<62, 1<<62, 1<<62, "")},
	}
	codec := line.NewCodec([]byte(fuzzSecret))
	for _, e := range examples {
		// The harness reaches acceptance: each example is a good ticket.
		if _, err := codec.Parse(e.event, signTicket(e.event, e.payload)); err != nil {
			f.Fatalf("example ticket of %q: %v", e.event, err)
		}
		f.Add(e.event, signTicket(e.event, e.payload), e.payload)
	}
	f.Add("premiere", "not-a-ticket", []byte{})
	f.Add("premiere", signTicket("live", ticketPayload(1, 1, 0, "")), ticketPayload(1, 1, 0, "a"))
	f.Fuzz(func(t *testing.T, event, raw string, payload []byte) {
		for _, tk := range []string{raw, signTicket(event, payload)} {
			got, err := codec.Parse(event, tk)
			if err != nil {
				if !errors.Is(err, line.ErrInvalidTicket) || !got.IsZero() {
					t.Fatalf("ticket %q refused with %v and ticket %q; want ErrInvalidTicket and none", tk, err, got.ID())
				}
				continue
			}
			if got.IsZero() || got.String() != tk {
				t.Fatalf("ticket %q accepted as %q (zero %v); want itself", tk, got.String(), got.IsZero())
			}
			if id := got.ID(); !ticketIDPattern.MatchString(id) {
				t.Fatalf("ticket %q accepted with id %q; want base36(seq) \".\" base64url(16 bytes)", tk, id)
			}
			// The account is the signer's word: any 1..64 bytes (the gateway
			// signs only ids account.ValidID accepts; the fuzzer, holding
			// the secret, signs others, and they pass, corpus c75382e8…).
			if acct := got.Account(); len(acct) > 64 {
				t.Fatalf("ticket %q accepted with an account of %d bytes", tk, len(acct))
			}
			if _, err := codec.Parse(event+"x", tk); err == nil {
				t.Fatalf("ticket %q of %q accepted for %q too", tk, event, event+"x")
			}
			for i := 0; i < len(tk); i++ {
				c := []byte(tk)
				c[i] ^= 0x01
				if _, err := codec.Parse(event, string(c)); err == nil {
					t.Fatalf("ticket %q accepted with character %d changed: %q", tk, i, c)
				}
			}
		}
	})
}

package gateway

import (
	"encoding/json"
	"strconv"

	"github.com/gofiber/fiber/v2"
)

// The waiting answer is the edge's commonest body by far (every poll of
// every fan in line): it is written by hand, byte for byte what
// encoding/json makes of waitingJSON (the tests compare the two), with no
// reflection and no allocation.

var mimeJSON = []byte(fiber.MIMEApplicationJSON)

// sendWaiting answers w as JSON with status code.
func sendWaiting(c *fiber.Ctx, code int, w waitingJSON) error {
	var buf [256]byte
	r := c.Response()
	r.SetStatusCode(code)
	r.Header.SetContentTypeBytes(mimeJSON)
	r.SetBody(appendWaiting(buf[:0], w))
	return nil
}

// appendWaiting appends w's JSON to b.
func appendWaiting(b []byte, w waitingJSON) []byte {
	b = append(b, '{')
	if w.Ticket != "" {
		b = append(b, `"ticket":`...)
		b = appendJSONString(b, w.Ticket)
		b = append(b, ',')
	}
	b = append(b, `"status":`...)
	b = appendJSONString(b, w.Status)
	b = append(b, `,"position":`...)
	b = strconv.AppendInt(b, w.Position, 10)
	b = append(b, `,"ahead":`...)
	b = strconv.AppendInt(b, w.Ahead, 10)
	b = append(b, `,"etaSeconds":`...)
	if w.ETASeconds == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *w.ETASeconds, 10)
	}
	b = append(b, `,"pollAfterMs":`...)
	b = strconv.AppendInt(b, w.PollAfterMs, 10)
	if w.Available != nil {
		b = append(b, `,"available":`...)
		b = strconv.AppendInt(b, *w.Available, 10)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. Tickets and states are
// plain ASCII that needs no escaping; anything else goes through
// encoding/json, so the bytes stay its own.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

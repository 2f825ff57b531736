package gateway

import (
	"time"

	"github.com/gofiber/fiber/v2"
)

// The ticket's and the pass's cookies are set on every join and on every
// admission: their Set-Cookie line is written by hand, byte for byte what
// fiber's Ctx.Cookie makes of the same cookie (the tests compare the two),
// without its pooled fasthttp.Cookie and time.Format's layout walk:
// BenchmarkSetCookie, about 300 ns a cookie through fiber, 90 by hand.

var headerSetCookie = []byte(fiber.HeaderSetCookie)

// putCookie sets the cookie name=value for the whole site until expires,
// HttpOnly and SameSite=Lax, Secure when the fan came over TLS: the one
// kind of cookie the queue's routes set. A cookie of that name set earlier
// in the same answer is replaced, as Ctx.Cookie replaces it.
func putCookie(c *fiber.Ctx, name, value string, expires time.Time, secure bool) {
	var buf [512]byte
	b := append(buf[:0], name...)
	b = append(b, '=')
	b = append(b, value...)
	b = append(b, "; expires="...)
	b = appendHTTPDate(b, expires)
	b = append(b, "; path=/; HttpOnly"...)
	if secure {
		b = append(b, "; secure"...)
	}
	b = append(b, "; SameSite=Lax"...)
	h := &c.Response().Header
	h.DelCookie(name)
	h.AddBytesKV(headerSetCookie, b)
}

// appendHTTPDate appends t as an HTTP date (RFC 1123, in GMT), as
// fasthttp.AppendHTTPDate does.
func appendHTTPDate(b []byte, t time.Time) []byte {
	const days, months = "SunMonTueWedThuFriSat", "JanFebMarAprMayJunJulAugSepOctNovDec"
	t = t.UTC()
	year, month, day := t.Date()
	hour, min, sec := t.Clock()
	wd := int(t.Weekday()) * 3
	m := (int(month) - 1) * 3
	b = append(b, days[wd:wd+3]...)
	b = append(b, ", "...)
	b = append2(b, day)
	b = append(b, ' ')
	b = append(b, months[m:m+3]...)
	b = append(b, ' ')
	b = append2(b, year/100)
	b = append2(b, year%100)
	b = append(b, ' ')
	b = append2(b, hour)
	b = append(b, ':')
	b = append2(b, min)
	b = append(b, ':')
	b = append2(b, sec)
	return append(b, " GMT"...)
}

// append2 appends n (0–99) as two digits.
func append2(b []byte, n int) []byte {
	return append(b, byte('0'+n/10), byte('0'+n%10))
}

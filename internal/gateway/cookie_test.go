package gateway

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// putCookie writes what fiber's Ctx.Cookie writes for the same cookie, and
// replaces a cookie of the same name set earlier in the answer as it does.
func TestPutCookieIsFiberCookie(t *testing.T) {
	app := fiber.New()
	setCookies := func(set func(c *fiber.Ctx)) []string {
		var fc fasthttp.RequestCtx
		c := app.AcquireCtx(&fc)
		defer app.ReleaseCtx(c)
		set(c)
		var all []string
		c.Response().Header.VisitAllCookie(func(_, v []byte) { all = append(all, string(v)) })
		return all
	}
	r := rand.New(rand.NewPCG(1, 2))
	times := []time.Time{time.Unix(1, 0), time.Date(2026, 12, 1, 9, 5, 7, 999, time.UTC), time.Date(2027, 2, 28, 23, 59, 59, 0, time.FixedZone("JST", 9*3600))}
	for range 200 {
		times = append(times, time.Unix(r.Int64N(1<<33), r.Int64N(1e9)))
	}
	for i, at := range times {
		name, value, secure := "wr_t_premiere", "AbC-_.123", i%2 == 0
		if i%3 == 0 {
			value = ""
		}
		want := setCookies(func(c *fiber.Ctx) {
			c.Cookie(&fiber.Cookie{Name: "other", Value: "x", Path: "/", Expires: at, HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode})
			c.Cookie(&fiber.Cookie{Name: name, Value: "first", Path: "/", Expires: at, HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode})
			c.Cookie(&fiber.Cookie{Name: name, Value: value, Path: "/", Expires: at, HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: secure})
		})
		got := setCookies(func(c *fiber.Ctx) {
			putCookie(c, "other", "x", at, false)
			putCookie(c, name, "first", at, false)
			putCookie(c, name, value, at, secure)
		})
		if len(got) != len(want) || len(want) != 2 {
			t.Fatalf("at %v: Set-Cookie %q; want %q", at, got, want)
		}
		for k := range want {
			if got[k] != want[k] {
				t.Errorf("at %v: Set-Cookie\n got %s\nwant %s", at, got[k], want[k])
			}
		}
	}
}

// BenchmarkSetCookie: a join's ticket cookie through fiber's Ctx.Cookie and
// by hand (putCookie).
func BenchmarkSetCookie(b *testing.B) {
	app := fiber.New()
	c := app.AcquireCtx(&fasthttp.RequestCtx{})
	defer app.ReleaseCtx(c)
	name, value := "wr_t_premiere", "1z141z4.AbCdEfGhIjKlMnOpQrStUv.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	until := time.Now().Add(24 * time.Hour)
	b.Run("fiber", func(b *testing.B) {
		for range b.N {
			c.Response().Header.Reset()
			c.Cookie(&fiber.Cookie{Name: name, Value: value, Path: "/", Expires: until, HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode})
		}
	})
	b.Run("byhand", func(b *testing.B) {
		for range b.N {
			c.Response().Header.Reset()
			putCookie(c, name, value, until, false)
		}
	})
}

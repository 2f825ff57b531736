package gateway

import (
	"io/fs"
	"mime"
	"path"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/gateway/web"
)

// csp allows nothing but the gateway itself: the pages carry no inline
// script or style and load nothing from elsewhere.
const csp = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

func (s *Server) pageRoutes() {
	files := web.FS()
	page := func(name string) fiber.Handler {
		return func(c *fiber.Ctx) error {
			if name != web.IndexPage {
				if _, err := s.event(c); err != nil {
					return err
				}
			}
			b, err := fs.ReadFile(files, name)
			if err != nil {
				return err
			}
			c.Set(fiber.HeaderContentSecurityPolicy, csp)
			c.Set(fiber.HeaderXFrameOptions, "DENY")
			c.Set(fiber.HeaderCacheControl, "no-cache")
			c.Type("html", "utf-8")
			return c.Send(b)
		}
	}
	s.app.Get("/", page(web.IndexPage))
	s.app.Get("/e/:event", page(web.RoomPage))
	s.app.Get("/e/:event/book", page(web.BookPage))
	s.app.Get("/static/+", func(c *fiber.Ctx) error {
		name := path.Clean(c.Params("+"))
		b, err := fs.ReadFile(files, name)
		if err != nil {
			return errNotFound
		}
		if t := mime.TypeByExtension(path.Ext(name)); t != "" {
			c.Set(fiber.HeaderContentType, t)
		}
		c.Set(fiber.HeaderCacheControl, "public, max-age=300")
		return c.Send(b)
	})
}

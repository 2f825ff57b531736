package gateway

import (
	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/gateway/openapi"
)

// apiDocument: GET /api/v1/openapi.json, the API's OpenAPI 3.1 document
// (package openapi): the same bytes for every client while the gateway
// runs, so an ETag and five minutes in any cache.
func apiDocument(c *fiber.Ctx) error {
	etag := openapi.ETag()
	c.Set(fiber.HeaderETag, etag)
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	if matches(c.Get(fiber.HeaderIfNoneMatch), etag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(openapi.JSON())
}

// Package web holds the fan's pages of the gateway: the list of events, the
// waiting room and the booking page, as html/template pages rendered by the
// gateway (templates/), the CSS and JavaScript they load (static/), and one
// catalog of words per language (static/i18n/<lang>.json), all embedded in
// the binary.
//
// The pages are plain files with no build step and no third-party code, so
// that what runs in the browser is exactly what is reviewed here, and so that
// they live under the gateway's strict Content-Security-Policy (everything
// from 'self', no inline script or style). The server renders each page
// whole, in the fan's language, so that the list of events and the waiting
// room work without JavaScript; the scripts then talk only to the gateway's
// JSON API of DESIGN.md and take their words from the same catalog. The
// gateway serves every static file at "/static/<name>"; the pages read the
// event id from location.pathname.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

// FS returns the embedded files with the "static/" prefix stripped, so
// FS().Open("app.css") works and a file server mounted at /static/ serves
// "/static/app.css" from "app.css".
//
// JavaScript files are ES modules: serve them as text/javascript (Go's mime
// table and fiber's both do), or the browser refuses to run them.
func FS() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		// fs.Sub fails only on an invalid path, and "static" is a constant.
		panic(err)
	}
	return sub
}

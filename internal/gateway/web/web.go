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
//
// The waiting room and a presale's register page are drawn from one
// documented Model (model.go, docs/PAGES.md) by a Look (look.go): the
// built-in one (templates/page.html around each page's blocks,
// templates/blocks-*.html), or a site's own from its page folder,
// its templates around the same blocks, its words over the catalog and its
// files served beside the pages.
//
// The room's SDK (sdk/: waitroom.js, an ES module for apps, and its types,
// waitroom.d.ts) is served at "/sdk/<name>". The waiting room's script is
// written on it, so what apps use is what every fan's page runs.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

//go:embed sdk
var sdkFiles embed.FS

// FS returns the embedded files with the "static/" prefix stripped, so
// FS().Open("app.css") works and a file server mounted at /static/ serves
// "/static/app.css" from "app.css".
//
// JavaScript files are ES modules: serve them as text/javascript (Go's mime
// table and fiber's both do), or the browser refuses to run them.
func FS() fs.FS { return sub(files, "static") }

// SDK returns the SDK's files (waitroom.js, waitroom.d.ts) with the "sdk/"
// prefix stripped, for a file server mounted at /sdk/.
func SDK() fs.FS { return sub(sdkFiles, "sdk") }

func sub(fsys fs.FS, dir string) fs.FS {
	s, err := fs.Sub(fsys, dir)
	if err != nil {
		// fs.Sub fails only on an invalid path, and dir is a constant.
		panic(err)
	}
	return s
}

package gateway_test

import (
	"html/template"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/gateway/web"
)

func previewPath(event, state, lang string) string {
	return "/api/v1/admin/events/" + event + "/preview?state=" + state + "&lang=" + lang
}

// Every state in every language renders the fans' waiting page from the
// event's config, with the words of that state, and inert: no script, no
// self-refresh, no cookie. Redis is killed first: a preview needs none of
// it, so it can neither read nor write the line.
func TestAdminPreview(t *testing.T) {
	e := setupAdmin(t, adminToken)
	e.redis.Kill()
	statusOf := regexp.MustCompile(`id="status" class="status" data-status="([a-z]+)"`)
	stateOf := regexp.MustCompile(`id="state" class="state badge" data-state="([a-z]+)"`)
	want := map[string]struct{ state, status string }{
		"prequeue": {"prequeue", "waiting"},
		"waiting":  {"open", "waiting"},
		"next":     {"open", "next"},
		"paused":   {"paused", "waiting"},
		"admitted": {"open", "admitted"},
		"soldout":  {"soldout", "soldout"},
		"closed":   {"closed", "closed"},
	}
	if len(want) != len(gateway.PreviewStates) {
		t.Fatalf("states %v; this test knows %d", gateway.PreviewStates, len(want))
	}
	for _, state := range gateway.PreviewStates {
		for _, lang := range web.Languages {
			t.Run(state+"/"+lang.Code, func(t *testing.T) {
				r := e.admin(http.MethodGet, previewPath("premiere", state, lang.Code), "")
				page := string(r.raw)
				if r.code != http.StatusOK || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/html") {
					t.Fatalf("%d %s %s; want 200 text/html", r.code, r.hdr.Get("Content-Type"), page)
				}
				if got := r.hdr.Get("Content-Language"); got != lang.Code || !strings.Contains(page, `<html lang="`+lang.Code+`">`) {
					t.Errorf("Content-Language %q; want %q, and <html lang> too", got, lang.Code)
				}
				if m := stateOf.FindStringSubmatch(page); m == nil || m[1] != want[state].state {
					t.Errorf("event state %v; want %q", m, want[state].state)
				}
				if m := statusOf.FindStringSubmatch(page); m == nil || m[1] != want[state].status {
					t.Errorf("fan's status %v; want %q", m, want[state].status)
				}
				l := web.LocaleFor(lang.Code)
				if words := template.HTMLEscapeString(l.T("room.status." + want[state].status)); !strings.Contains(page, words) {
					t.Errorf("the page lacks %q", words)
				}
				for _, inert := range []string{"<script", `http-equiv="refresh"`, "/qr.svg"} {
					if strings.Contains(page, inert) {
						t.Errorf("the preview carries %q; want it inert", inert)
					}
				}
				if c := r.hdr.Values("Set-Cookie"); len(c) > 0 {
					t.Errorf("Set-Cookie %v; a preview sets none", c)
				}
				if cc := r.hdr.Get("Cache-Control"); cc != "no-store" {
					t.Errorf("Cache-Control %q; want no-store", cc)
				}
				if !strings.Contains(page, `href="/e/premiere?lang=ja"`) {
					t.Error("the language switcher does not lead to the fans' page")
				}
			})
		}
	}
	// What the made-up fan is told comes from the rate in force (100/s in
	// this config): ten minutes from the front is place 60,000, its ETA
	// 10 minutes; next in line, one place.
	page := string(e.admin(http.MethodGet, previewPath("premiere", "waiting", "en"), "").raw)
	for _, w := range []string{`<dd id="position">60,000</dd>`, `<dd id="ahead">59,999</dd>`, "4 places left"} {
		if !strings.Contains(page, w) {
			t.Errorf("waiting preview lacks %s", w)
		}
	}
	page = string(e.admin(http.MethodGet, previewPath("premiere", "next", "ja"), "").raw)
	if !strings.Contains(page, `<dd id="position">1</dd>`) {
		t.Error("next preview: the fan is not first")
	}
	// A pre-queue names when the order is drawn, from the event's opens_at.
	page = string(e.admin(http.MethodGet, previewPath("later", "prequeue", "en"), "").raw)
	if !strings.Contains(page, "2099") {
		t.Errorf("pre-queue preview of an event opening in 2099 does not say when:\n%s", page)
	}
}

func TestAdminPreviewRefusesBadInput(t *testing.T) {
	e := setupAdmin(t, adminToken)
	tests := []struct {
		name, path string
		code       int
		errCode    string
		field      string
	}{
		{"unknown state", previewPath("premiere", "lobby", "en"), 400, "invalid_request", "state"},
		{"no state", "/api/v1/admin/events/premiere/preview?lang=en", 400, "invalid_request", "state"},
		// The presale's states come with the presale: not faked before.
		{"presale state", previewPath("premiere", "registration", "en"), 400, "invalid_request", "state"},
		{"bad lang", previewPath("premiere", "waiting", "fr"), 400, "invalid_request", "lang"},
		{"unknown event", previewPath("nope", "waiting", "en"), 404, "unknown_event", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.admin(http.MethodGet, tt.path, "")
			if r.code != tt.code || r.body["error"] != tt.errCode || (tt.field != "" && r.body["field"] != tt.field) {
				t.Errorf("%d %s; want %d %s naming %q", r.code, r.raw, tt.code, tt.errCode, tt.field)
			}
		})
	}
	// No lang is English.
	if r := e.admin(http.MethodGet, "/api/v1/admin/events/premiere/preview?state=closed", ""); r.code != 200 || r.hdr.Get("Content-Language") != "en" {
		t.Errorf("no lang: %d %s; want 200 in English", r.code, r.hdr.Get("Content-Language"))
	}
}

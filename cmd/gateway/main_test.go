package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/gateway/web"
)

// gateway pages DIR writes a page folder a site starts from: the built-in
// pages as they are, which load as a site's own, and overwrites nothing.
func TestPagesWritesTheBuiltinPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my-look")
	if err := writePages(dir); err != nil {
		t.Fatal(err)
	}
	for _, page := range web.LookPages {
		want, _ := web.BuiltinTemplate(page)
		got, err := os.ReadFile(filepath.Join(dir, page+".html"))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s.html: %v; want the built-in page as it is", page, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "assets")); err != nil || !st.IsDir() {
		t.Errorf("no assets/ folder: %v", err)
	}
	if _, err := web.LoadLook(dir); err != nil {
		t.Errorf("the folder does not load as a site's: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "room.html"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writePages(dir); err == nil || !strings.Contains(err.Error(), "is there already") {
		t.Errorf("writing over a folder: %v; want it refused", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "room.html")); string(b) != "mine" {
		t.Error("the site's room.html was overwritten")
	}
}

package localsvc

import (
	"fmt"
	"os/exec"
	"strings"
)

// EnsureFonts makes sure fontconfig has a font for each language (fc-list
// :lang=xx), installing the Debian packages given when one is missing and we
// are root with apt-get, so that a browser's screenshots of pages in those
// languages show their letters, not empty boxes. Otherwise it returns an
// error that says what to install; nothing but the screenshots needs them.
func EnsureFonts(langs []string, debPackages ...string) error {
	missing := func() []string {
		var out []string
		for _, l := range langs {
			b, err := exec.Command("fc-list", ":lang="+l, "family").Output()
			if err != nil || strings.TrimSpace(string(b)) == "" {
				out = append(out, l)
			}
		}
		return out
	}
	return ensure(fmt.Sprintf("no font for %v", missing()), func() bool { return len(missing()) == 0 }, debPackages...)
}

package localsvc

import (
	"fmt"
	"os"
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
	if len(missing()) == 0 {
		return nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	if len(missing()) == 0 {
		return nil
	}
	hint := fmt.Errorf("%w: no font for %v; install one with: sudo apt-get install -y %s", ErrMissing, missing(), strings.Join(debPackages, " "))
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return hint
	}
	fmt.Fprintf(os.Stderr, "localsvc: fonts for %v missing, installing Debian packages %v\n", missing(), debPackages)
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	install := append([]string{"-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends"}, debPackages...)
	for _, args := range [][]string{{"update"}, install} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%w (apt-get %s: %v)", hint, strings.Join(args, " "), err)
		}
	}
	if m := missing(); len(m) > 0 {
		return hint
	}
	return nil
}

package localsvc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

var npmMu sync.Mutex

// NPMPackage returns the folder whose node_modules holds the npm package
// name at version, a test-only dependency: installed from the npm registry
// on first use into the user's cache (…/waitroom/npm/<name>-<version>),
// never into the repository, and kept there for the next run. npm (and
// node) come from Debian's packages when missing.
func NPMPackage(name, version string) (string, error) {
	npmMu.Lock()
	defer npmMu.Unlock()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "waitroom", "npm", name+"-"+version)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", name, "package.json")); err == nil {
		return dir, nil
	}
	npm, err := Ensure("npm", "npm")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-save", "--no-audit", "--no-fund",
		"--no-package-lock", name+"@"+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s@%s: %v\n%s", name, version, err, out)
	}
	return dir, nil
}

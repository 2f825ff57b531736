package config

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// debounce lets a burst of file events (an editor's write, rename, chmod)
// end before the file is read.
const debounce = 100 * time.Millisecond

// Watch calls reload when the config file's folder changes (force false) and
// on every value from hup, e.g. SIGHUP (force true), until ctx ends. It
// watches the folder, not the file: editors (vim, sed -i) replace the file by
// a rename and Kubernetes swaps a ConfigMap by re-pointing the ..data symlink,
// and a watch on the old file would see neither. reload decides whether the
// content changed and what to do with it.
func Watch(ctx context.Context, path string, hup <-chan os.Signal, log *slog.Logger, reload func(force bool)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config: watch: %w", err)
	}
	defer w.Close()
	dir, base := filepath.Dir(path), filepath.Base(path)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("config: watch %s: %w", dir, err)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			log.Info("SIGHUP: reloading the config", "path", path)
			reload(true)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) == 0 {
				continue // chmod alone changes no content
			}
			if name := filepath.Base(ev.Name); name != base && !strings.HasPrefix(name, "..") {
				continue // another file of the folder (a ConfigMap swap moves ..data)
			}
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			log.Warn("config watch error", "err", err)
		case <-timer.C:
			reload(false)
		}
	}
}

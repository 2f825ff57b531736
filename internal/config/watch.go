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

	"github.com/waitroom/waitroom/internal/platform/metrics"
)

// debounce lets a burst of file events (an editor's write, rename, chmod)
// end before the file is read.
const debounce = 100 * time.Millisecond

// Watch follows the file the config came from until ctx ends: it re-reads it
// when it changes and on every value from hup (SIGHUP: even if unchanged),
// and calls applied with the config it replaced and the new one after each
// reload that put a new config in force. An edit that does not parse or
// validate is refused once, logged with the key it names and counted
// (waitroom_config_reload_errors_total), and the config in force stays. When
// the file cannot be watched, SIGHUP alone reloads it (logged once). The
// admitter and the gateway both follow their config this way.
func (l *Live) Watch(ctx context.Context, hup <-chan os.Signal, log *slog.Logger, applied func(old, cur *Config)) {
	if l.path == "" {
		return
	}
	reload := func(force bool) {
		old, cur, err := l.Reload(force)
		switch {
		case err != nil:
			metrics.ConfigReloadErrors.Inc()
			log.Error("config reload refused; the previous config stays in force", "path", l.path, "err", err)
		case cur != nil:
			metrics.ConfigReloads.Inc()
			applied(old, cur)
		}
	}
	if err := watchFile(ctx, l.path, hup, log, reload); err != nil {
		log.Warn("config file not watched; SIGHUP reloads it", "path", l.path, "err", err)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reload(true)
			}
		}
	}
}

// watchFile calls reload when the config file's folder changes (force
// false) and on every value from hup (force true), until ctx ends. It
// watches the folder, not the file: editors (vim, sed -i) replace the file by
// a rename and Kubernetes swaps a ConfigMap by re-pointing the ..data symlink,
// and a watch on the old file would see neither. reload decides whether the
// content changed and what to do with it.
func watchFile(ctx context.Context, path string, hup <-chan os.Signal, log *slog.Logger, reload func(force bool)) error {
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

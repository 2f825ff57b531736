package config

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// Live is a config a running process re-reads from its file: the admitter
// for its admission settings, the gateway for its events. Readers call Load
// on every use; Reload swaps a new config in atomically, or refuses it and
// keeps the one in force.
type Live struct {
	path string
	cur  atomic.Pointer[Config]

	mu      sync.Mutex // serialises reloads; guards loaded and refused
	loaded  []byte     // the file bytes of the config in force
	refused []byte     // the last bytes refused, so a bad edit is refused once
}

// NewLive holds cfg, which was loaded from path ("" = never reloaded).
func NewLive(path string, cfg *Config) *Live {
	l := &Live{path: path}
	l.cur.Store(cfg)
	if path != "" {
		if b, err := os.ReadFile(path); err == nil {
			l.loaded = b
		}
	}
	return l
}

// Path is the file the config is re-read from.
func (l *Live) Path() string { return l.path }

// Load is the config in force.
func (l *Live) Load() *Config { return l.cur.Load() }

// Reload re-reads the file. It returns the config that was in force and the
// new one when it swapped one in; nil, nil, nil when the file holds the
// config in force or one already refused (unless force, e.g. SIGHUP); and
// the error, which names the bad key, when the file is unreadable or
// invalid: the previous config then stays in force.
func (l *Live) Reload(force bool) (old, cur *Config, err error) {
	if l.path == "" {
		return nil, nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := os.ReadFile(l.path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	if !force && (bytes.Equal(b, l.loaded) || bytes.Equal(b, l.refused)) {
		return nil, nil, nil
	}
	cfg, err := Parse(b, os.LookupEnv)
	if err != nil {
		l.refused = b
		return nil, nil, err
	}
	l.loaded = b
	return l.cur.Swap(cfg), cfg, nil
}

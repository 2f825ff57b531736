package rdb

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Our Lua runs as Redis functions (Redis ≥ 7): each package's scripts are
// one library, loaded into Redis once (FUNCTION LOAD) and called by name
// (FCALL). A library's fragments (the helpers its scripts share: clock,
// the line's rules, the draw…) are defined once, when Redis loads it; a
// script sent with EVAL defined every helper it included again at every
// call (Lua makes a closure of each local function as the script runs: 1 to
// 3 µs of Redis per call for the join's, docs/EDGE.md).
//
// A library is loaded when a process opens its Redis (Open) and again
// whenever Redis says it lacks a function (a restart without persistence, a
// FUNCTION FLUSH, a new master of a cluster): the call is then sent once
// more (batch.go, durable.go). On a cluster a library is loaded on every
// master; replicas have it from their master.
//
// The library's name carries its version, the first hex digits of the
// SHA-1 of its code (wr_line_3f2a…), and so does every function's: a
// process of another release running beside this one (a rolling deploy)
// loads and calls its own, never replacing ours. Old versions stay in
// Redis until deleted (FUNCTION DELETE; each is some kilobytes).

// Library is one package's Lua: the fragments its scripts share, and the
// scripts, each a function of the library. Make one per package with
// NewLibrary and its scripts with Script, as package variables: the code
// is fixed at its first use.
type Library struct {
	name      string
	fragments []string
	scripts   []*Script

	once    sync.Once
	code    string // FUNCTION LOAD's argument
	version string
}

// Script is one of a library's scripts: a function called with the
// script's KEYS and ARGV, which it reads as an EVAL script does.
type Script struct {
	lib  *Library
	name string
	body string
	fn   string // the function's name in Redis (set when the library is built)
}

var (
	librariesMu sync.Mutex
	libraries   []*Library // every library of the binary, loaded at Open
)

// libName: library and script names are Lua identifiers' letters, so that
// a function's name is valid in Redis.
var libName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// NewLibrary is the library name, whose scripts share fragments (Lua
// defining local functions and constants only: no redis.call runs while
// Redis loads a library). A fragment may use KEYS and ARGV, which are
// those of the script running. Two fragments must not define the same
// name: that is a bug of the code, so NewLibrary panics.
func NewLibrary(name string, fragments ...string) *Library {
	if !libName.MatchString(name) {
		panic(fmt.Sprintf("rdb: library name %q: want [a-z][a-z0-9_]*", name))
	}
	l := &Library{name: name}
	defined := map[string]bool{}
	seen := map[string]bool{}
	for _, f := range fragments {
		if seen[f] {
			continue // one fragment included by two of the others
		}
		seen[f] = true
		for _, n := range topLevelNames(f) {
			if defined[n] {
				panic(fmt.Sprintf("rdb: library %s: two fragments define %q", name, n))
			}
			defined[n] = true
		}
		l.fragments = append(l.fragments, f)
	}
	librariesMu.Lock()
	libraries = append(libraries, l)
	librariesMu.Unlock()
	return l
}

// topDef finds what a fragment defines at its top level (a line starting
// "local function f" or "local a, b =").
var topDef = regexp.MustCompile(`(?m)^local\s+(?:function\s+([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_,\s]*?)\s*=)`)

func topLevelNames(fragment string) []string {
	var out []string
	for _, m := range topDef.FindAllStringSubmatch(fragment, -1) {
		if m[1] != "" {
			out = append(out, m[1])
			continue
		}
		for _, n := range strings.Split(m[2], ",") {
			out = append(out, strings.TrimSpace(n))
		}
	}
	return out
}

// Script adds a script to the library: body is its Lua, as an EVAL
// script's (KEYS, ARGV, return), over the library's fragments. name is
// unique in the library.
func (l *Library) Script(name, body string) *Script {
	if !libName.MatchString(name) {
		panic(fmt.Sprintf("rdb: script name %q: want [a-z][a-z0-9_]*", name))
	}
	if l.code != "" {
		panic(fmt.Sprintf("rdb: library %s is in use already; script %s comes too late", l.name, name))
	}
	for _, s := range l.scripts {
		if s.name == name {
			panic(fmt.Sprintf("rdb: library %s: two scripts named %s", l.name, name))
		}
	}
	s := &Script{lib: l, name: name, body: body}
	l.scripts = append(l.scripts, s)
	return s
}

// build writes the library's code once: its fragments at the top (run
// once, when Redis loads it), then each script as a function. KEYS and
// ARGV are the library's two upvalues, set by the function that runs:
// Redis runs one function at a time, so fragments and bodies read them as
// an EVAL script reads its globals.
func (l *Library) build() {
	l.once.Do(func() {
		var top strings.Builder
		top.WriteString("local KEYS, ARGV\n")
		for _, f := range l.fragments {
			top.WriteString(f)
			top.WriteString("\n")
		}
		h := sha1.New()
		h.Write([]byte(top.String()))
		for _, s := range l.scripts {
			h.Write([]byte("\x00" + s.name + "\x00" + s.body))
		}
		l.version = hex.EncodeToString(h.Sum(nil)[:5])
		prefix := "wr_" + l.name + "_" + l.version
		var b strings.Builder
		b.WriteString("#!lua name=" + prefix + "\n")
		b.WriteString(top.String())
		for _, s := range l.scripts {
			s.fn = prefix + "_" + s.name
			fmt.Fprintf(&b, "redis.register_function('%s', function(keys, args)\nKEYS, ARGV = keys, args\n%s\nend)\n", s.fn, s.body)
		}
		l.code = b.String()
	})
}

// Name is the library's name in Redis, with its version (FUNCTION LIST).
func (l *Library) Name() string { l.build(); return "wr_" + l.name + "_" + l.version }

// Code is what FUNCTION LOAD is given.
func (l *Library) Code() string { l.build(); return l.code }

// Function is the script's name in Redis (FCALL's first argument).
func (s *Script) Function() string { s.lib.build(); return s.fn }

// fcall adds the script's call to p (a pipeline or a client).
func (s *Script) fcall(ctx context.Context, p redis.Cmdable, keys []string, args []any) *redis.Cmd {
	return p.FCall(ctx, s.Function(), keys, args...)
}

// Load loads every library of the binary into Redis (on a cluster, on
// every master), replacing any of the same version. Open does it; a call
// that finds its function missing loads its library again.
func (c *Client) Load(ctx context.Context) error {
	librariesMu.Lock()
	all := append([]*Library(nil), libraries...)
	librariesMu.Unlock()
	var errs []error
	for _, l := range all {
		if len(l.scripts) == 0 {
			continue
		}
		errs = append(errs, load(ctx, c.Cmdable, l))
	}
	return errors.Join(errs...)
}

// load loads l where calls go: on every master of a cluster, else on the
// one node.
func load(ctx context.Context, rdb Cmdable, l *Library) error {
	code := l.Code()
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return node.FunctionLoadReplace(ctx, code).Err()
		})
		return Interpret("function load "+l.Name(), err)
	}
	return Interpret("function load "+l.Name(), rdb.FunctionLoadReplace(ctx, code).Err())
}

// isNoFunction: Redis lacks the function called (a restart that kept no
// data, a FUNCTION FLUSH, a new master): its library is loaded and the
// call sent again, and the miss is not a fault (metricsHook).
func isNoFunction(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.Contains(re.Error(), "Function not found")
}

// Library is the library the script belongs to.
func (s *Script) Library() *Library { return s.lib }

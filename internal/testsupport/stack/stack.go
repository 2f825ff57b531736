// Package stack runs the whole of waitroom for end-to-end tests: the real
// gateway, admitter and booking binaries, built from this tree, on private
// Redis and PostgreSQL, on free loopback ports. Tests can kill, stop and
// restart any part of it.
package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/testsupport/apicheck"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// TicketSecret is the stack's auth.ticket_secret: a test may read its
// tickets (ParseTicket, TicketID) as the gateway does.
const TicketSecret = "stack-ticket-secret-0123456789abcdef"

// ParseTicket checks and reads ticket, a ticket of event as a fan holds
// it, as the stack's gateway does (line.Codec.Parse with TicketSecret).
func ParseTicket(event, ticket string) (line.Ticket, error) {
	return line.NewCodec([]byte(TicketSecret)).Parse(event, ticket)
}

// TicketID is the id (the Redis member, the pass's sub) of ticket, a
// ticket of event (ParseTicket).
func TicketID(event, ticket string) (string, error) {
	t, err := ParseTicket(event, ticket)
	return t.ID(), err
}

// DrawSecret is the stack's auth.draw_secret: a test may derive a draw's
// seed from its nonce as the admitter does, or check a published one.
const DrawSecret = "stack-draw-secret-0123456789abcdef"

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Binaries builds cmd/gateway, cmd/admitter and cmd/booking (and
// cmd/rehearse, which drives them) once per test binary and returns the
// folder holding them. They are built as the Dockerfile and make build
// build them (static, trimmed, stripped), which compiles nothing again
// after make build; and into a folder that lasts as long as the build
// cache (it is named after the cache and this tree), so that go build
// links again only what changed since the last test binary that asked:
// several packages' test binaries running at once take turns (a lock), the
// later ones finding the binaries up to date.
func Binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root := testenv.Repo(t)
		cache, err := exec.Command("go", "env", "GOCACHE").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOCACHE: %v", err)
			return
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(string(cache)) + "\x00" + root))
		binDir = filepath.Join(os.TempDir(), "wr-bin-"+hex.EncodeToString(sum[:8]))
		if buildErr = os.MkdirAll(binDir, 0o755); buildErr != nil {
			return
		}
		lock, err := os.OpenFile(filepath.Join(binDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			buildErr = err
			return
		}
		defer lock.Close()
		if buildErr = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); buildErr != nil {
			return
		}
		// go build replaces a binary it links again by a rename: a stack
		// of another test binary running the old one keeps it.
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", binDir+"/", "./cmd/gateway", "./cmd/admitter", "./cmd/booking", "./cmd/rehearse")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("stack: %v", buildErr)
	}
	return binDir
}

// Options shape a stack.
type Options struct {
	// Events is the YAML of the config's events list (indented as items of
	// a top-level "events:" key).
	Events string
	// Booking is extra YAML under booking: (indented two spaces), e.g. the
	// simulator settings.
	Booking string
	// Tick is the admitter's tick (default 200ms).
	Tick string
	// JoinsPerIP is gateway.joins_per_ip_per_minute (default 0: no limit).
	JoinsPerIP int
	// TrustedProxies is gateway.trusted_proxies (e.g. 127.0.0.1/32, so that
	// a test's clients can each speak for a fan of their own with
	// X-Forwarded-For, as a load balancer would).
	TrustedProxies []string
	// RedisAOF runs Redis with the append-only file (for restart tests).
	RedisAOF bool
	// Admitters is how many admitter replicas to run (default 1).
	Admitters int
	// DatabaseURL, when set, is the (empty) database to use instead of a new
	// one on the shared test server: for tests that restart PostgreSQL.
	DatabaseURL string
	// Gateways is how many gateway replicas to run (default 1).
	Gateways int
	// RedisCluster runs Redis as a three-master Redis Cluster instead of a
	// single server; redis.url is then the cluster's seed list. RedisAOF
	// does not apply to it.
	RedisCluster bool
	// ClusterReplicas gives each master of the RedisCluster that many
	// replicas (a master killed is replaced by its replica).
	ClusterReplicas int
	// RedisWaitReplicas is config redis.wait_replicas.
	RedisWaitReplicas int
	// AdminToken is auth.admin_token ("" = the operators' API off).
	AdminToken string
	// Tokens are auth.tokens, the operators' named tokens (the config
	// holds their SHA-256 only).
	Tokens []Token
	// Admitter is extra flow-style keys of admitter: (starting with ", "),
	// e.g. `, adaptive: {hold_p99: "300ms"}`.
	Admitter string
	// ProxyTimeout is gateway.proxy_timeout (default "5s").
	ProxyTimeout string
	// AccountKeysFile is auth.account_keys_file ("" = no accounts).
	AccountKeysFile string
	// Env, when set, is asked once Redis and PostgreSQL are up (and the
	// addresses chosen), before any service starts: extra environment for
	// the processes whose name begins with each key (e.g. "gateway":
	// WAITROOM_REDIS_URL through a fault proxy).
	Env func(s *Stack) map[string][]string
	// Bin is the folder of the gateway, admitter and booking binaries to
	// run ("" = Binaries, built from this tree): a test of a deliberately
	// broken build brings its own.
	Bin string
	// GatewayKeys is extra flow-style keys of gateway: (starting with
	// ", "), e.g. `, public_url: "https://tickets.example"`; {gateway} in
	// it is the first gateway's host:port.
	GatewayKeys string
	// Notify is the flow-style YAML of notify: (e.g. `{smtp_url:
	// "smtp://127.0.0.1:2525", timeout: "1s"}`; "" = no email).
	Notify string
}

// Stack is a running waitroom.
type Stack struct {
	t          testing.TB
	Dir        string
	ConfigPath string
	Gateway    string   // http://127.0.0.1:port of the first gateway
	Gateways   []string // every gateway replica, Gateway first
	Booking    string
	Admitter   string            // metrics address of the first admitter
	Redis      *localsvc.Redis   // nil with RedisCluster
	Cluster    *localsvc.Cluster // nil without RedisCluster
	// RDB is a client of the stack's Redis: a *redis.Client, or a
	// *redis.ClusterClient with RedisCluster.
	RDB   redis.UniversalClient
	DBURL string
	env   []string
	// procEnv is Options.Env's answer: extra environment by name prefix.
	procEnv map[string][]string
	procs   map[string]*Proc
	mu      sync.Mutex
}

// Proc is one running service process.
type Proc struct {
	Name string
	Addr string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// Start brings up Redis (one server, or a three-master cluster),
// PostgreSQL (migrated and seeded), booking, the admitters and the gateways,
// and waits until each is ready.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	bin := o.Bin
	if bin == "" {
		bin = Binaries(t)
	}
	dir, err := os.MkdirTemp("", "wr-stack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if o.Tick == "" {
		o.Tick = "200ms"
	}
	if o.Admitters == 0 {
		o.Admitters = 1
	}
	if o.Gateways == 0 {
		o.Gateways = 1
	}
	if o.ProxyTimeout == "" {
		o.ProxyTimeout = "5s"
	}
	var (
		rs       *localsvc.Redis
		cluster  *localsvc.Cluster
		rdb      redis.UniversalClient
		redisURL string
	)
	if o.RedisCluster {
		cluster, rdb = testenv.ClusterWith(t, o.ClusterReplicas)
		redisURL = cluster.Seeds()
	} else {
		rs = testenv.RedisServer(t, localsvc.RedisOptions{AOF: o.RedisAOF})
		rdb = redis.NewClient(&redis.Options{Addr: rs.Addr})
		t.Cleanup(func() { rdb.Close() })
		redisURL = rs.URL()
	}
	dbURL := o.DatabaseURL
	if dbURL == "" {
		dbURL = testenv.Database(t, "empty", nil)
	}
	port := func() string {
		p, err := localsvc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(p)
	}
	gw, bk := "127.0.0.1:"+port(), "127.0.0.1:"+port()
	s := &Stack{
		t: t, Dir: dir, Gateway: "http://" + gw, Booking: "http://" + bk,
		Redis: rs, Cluster: cluster, RDB: rdb, DBURL: dbURL,
		procs: map[string]*Proc{},
	}
	key := filepath.Join(dir, "jwt.pem")
	if _, err := pass.EnsureKeyFile(key); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`redis: {url: %q, wait_replicas: %d}
postgres: {url: %q}
auth: {ticket_secret: %q, draw_secret: %q, signing_key_file: %q, admin_token: %q, account_keys_file: %q, tokens: %s}
notify: %s
gateway: {addr: %q, booking_url: %q, joins_per_ip_per_minute: %d, proxy_timeout: %q, trusted_proxies: %s%s}
admitter: {addr: "127.0.0.1:0", tick: %q%s}
booking:
  addr: %q
  jwks_url: "http://%s/.well-known/jwks.json"
%s
events:
%s
`, redisURL, o.RedisWaitReplicas, dbURL, TicketSecret, DrawSecret, key, o.AdminToken, o.AccountKeysFile, tokensYAML(o.Tokens), notifyYAML(o.Notify), gw, s.Booking, o.JoinsPerIP, o.ProxyTimeout, yamlList(o.TrustedProxies), strings.ReplaceAll(o.GatewayKeys, "{gateway}", gw), o.Tick, o.Admitter, bk, gw, indentBooking(o.Booking), o.Events)
	s.ConfigPath = filepath.Join(dir, "waitroom.yaml")
	if err := os.WriteFile(s.ConfigPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.env = append(os.Environ(), "WAITROOM_CONFIG="+s.ConfigPath)
	for _, k := range []string{"WAITROOM_REDIS_URL", "WAITROOM_DATABASE_URL", "WAITROOM_GATEWAY_ADDR", "WAITROOM_BOOKING_ADDR", "WAITROOM_ADMITTER_ADDR", "WAITROOM_BOOKING_URL", "WAITROOM_TICKET_SECRET", "WAITROOM_DRAW_SECRET", "WAITROOM_SIGNING_KEY_FILE", "WAITROOM_PAYMENT_SECRET"} {
		s.env = append(s.env, k+"=")
	}
	for _, step := range []string{"migrate", "seed"} {
		cmd := exec.Command(filepath.Join(bin, "booking"), "-config", s.ConfigPath, step)
		cmd.Env = s.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("stack: booking %s: %v\n%s", step, err, out)
		}
	}
	if o.Env != nil {
		s.procEnv = o.Env(s)
	}
	s.Add("booking", bk, filepath.Join(bin, "booking"), "serve")
	s.Add("gateway", gw, filepath.Join(bin, "gateway"))
	s.Gateways = append(s.Gateways, s.Gateway)
	for i := 2; i <= o.Gateways; i++ {
		addr := "127.0.0.1:" + port()
		s.Add(fmt.Sprintf("gateway%d", i), addr, filepath.Join(bin, "gateway"))
		s.Gateways = append(s.Gateways, "http://"+addr)
	}
	// Every /api/v1 exchange of a test with a gateway of the stack,
	// through the default transport (http.Get, http.DefaultClient, a
	// client of no Transport of its own), is validated against the OpenAPI
	// document. Not a benchmark's: its traffic is what it measures.
	if _, bench := t.(*testing.B); !bench {
		apicheck.Install()
		for _, g := range s.Gateways {
			apicheck.Watch(t, g)
		}
	}
	for i := 0; i < o.Admitters; i++ {
		addr := "127.0.0.1:" + port()
		name := "admitter"
		if i > 0 {
			name = fmt.Sprintf("admitter%d", i+1)
		} else {
			s.Admitter = "http://" + addr
		}
		s.Add(name, addr, filepath.Join(bin, "admitter"))
	}
	t.Cleanup(s.StopAll)
	return s
}

func notifyYAML(flow string) string {
	if flow == "" {
		return "{}"
	}
	return flow
}

// yamlList is a flow-style YAML list of strings.
func yamlList(items []string) string {
	q := make([]string, len(items))
	for i, v := range items {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Token is one of the operators' named tokens (DESIGN.md, Integrations:
// Operators' tokens).
type Token struct {
	Name   string
	Token  string   // the token itself: the config gets its SHA-256
	Scopes []string // config.Scope*
	Events []string // nil: every event
}

// tokensYAML is the flow-style YAML of auth.tokens.
func tokensYAML(tokens []Token) string {
	items := make([]string, len(tokens))
	for i, tk := range tokens {
		sum := sha256.Sum256([]byte(tk.Token))
		items[i] = fmt.Sprintf("{name: %q, sha256: %q, scopes: %s", tk.Name, hex.EncodeToString(sum[:]), yamlList(tk.Scopes))
		if tk.Events != nil {
			items[i] += ", events: " + yamlList(tk.Events)
		}
		items[i] += "}"
	}
	return "[" + strings.Join(items, ", ") + "]"
}

func indentBooking(extra string) string {
	if strings.TrimSpace(extra) == "" {
		return `  payment: {secret: "stack-payment-secret-0123456789abcdef", simulator: {enabled: true, outcome: "succeed", delay: "300ms"}}`
	}
	return extra
}

// Add starts a service process (name must be unique) listening on addr and
// waits for its /readyz.
func (s *Stack) Add(name, addr, bin string, args ...string) *Proc {
	s.t.Helper()
	p := &Proc{Name: name, Addr: addr, args: append([]string{bin, "-config", s.ConfigPath}, args...), log: filepath.Join(s.Dir, name+".log")}
	s.mu.Lock()
	s.procs[name] = p
	s.mu.Unlock()
	s.start(p)
	return p
}

func (s *Stack) start(p *Proc) {
	s.t.Helper()
	cmd := exec.Command(p.args[0], p.args[1:]...)
	env := append([]string{}, s.env...)
	switch {
	case strings.HasPrefix(p.Name, "admitter"):
		env = append(env, "WAITROOM_ADMITTER_ADDR="+p.Addr)
	case p.Name == "booking" || strings.HasPrefix(p.Name, "booking"):
		env = append(env, "WAITROOM_BOOKING_ADDR="+p.Addr)
	case strings.HasPrefix(p.Name, "gateway"):
		env = append(env, "WAITROOM_GATEWAY_ADDR="+p.Addr)
	}
	for prefix, extra := range s.procEnv {
		if strings.HasPrefix(p.Name, prefix) {
			env = append(env, extra...)
		}
	}
	cmd.Env = env
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("stack: start %s: %v", p.Name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			s.t.Fatalf("stack: %s exited at start:\n%s", p.Name, s.Log(p.Name))
		default:
		}
		if res, err := http.Get("http://" + p.Addr + "/readyz"); err == nil {
			res.Body.Close()
			// Ready, and ours: another scenario's service that took the
			// port first answers /readyz too (then ours cannot bind it,
			// and exits, above).
			if res.StatusCode == http.StatusOK && localsvc.Listens(cmd.Process.Pid, p.Addr) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("stack: %s not ready after 20s:\n%s", p.Name, s.Log(p.Name))
}

// Proc returns a running process by name.
func (s *Stack) Proc(name string) *Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[name]
}

// Pid is the process's id while it runs (0 before it started).
func (p *Proc) Pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill sends SIGKILL to a service, as a crash would, and waits for it.
func (s *Stack) Kill(name string) { s.signal(name, syscall.SIGKILL) }

// Stop sends SIGTERM and waits for a graceful exit.
func (s *Stack) Stop(name string) { s.signal(name, syscall.SIGTERM) }

func (s *Stack) signal(name string, sig syscall.Signal) {
	p := s.Proc(name)
	if p == nil || p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Restart starts a stopped or killed service again.
func (s *Stack) Restart(name string) {
	s.t.Helper()
	p := s.Proc(name)
	select {
	case <-p.done:
	default:
		s.Stop(name)
	}
	s.start(p)
}

// StopAll stops every service (gateway first).
func (s *Stack) StopAll() {
	s.mu.Lock()
	names := make([]string, 0, len(s.procs))
	for n := range s.procs {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, prefix := range []string{"gateway", "admitter", "booking"} {
		for _, n := range names {
			if strings.HasPrefix(n, prefix) {
				s.Stop(n)
			}
		}
	}
}

// Log returns what a service wrote so far.
func (s *Stack) Log(name string) string {
	p := s.Proc(name)
	if p == nil {
		return ""
	}
	b, _ := os.ReadFile(p.log)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// DB opens a connection to the stack's database.
func (s *Stack) DB(ctx context.Context) *pgx.Conn {
	s.t.Helper()
	c, err := pgx.Connect(ctx, s.DBURL)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// EditConfig rewrites the stack's config file the way editors and sed -i
// do: a new file written beside it and renamed over the old one (the
// processes follow the file live). An edit that changes nothing fails the
// test: it would wait for a change that never comes.
func (s *Stack) EditConfig(t testing.TB, edit func(string) string) {
	t.Helper()
	old, err := os.ReadFile(s.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	next := edit(string(old))
	if next == string(old) {
		t.Fatal("stack: the config edit changed nothing")
	}
	tmp := filepath.Join(filepath.Dir(s.ConfigPath), ".waitroom.yaml.swp")
	if err := os.WriteFile(tmp, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.ConfigPath); err != nil {
		t.Fatal(err)
	}
}

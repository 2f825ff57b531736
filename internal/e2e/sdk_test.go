package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/mailsink"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// sdkEvents: a paused sale (the tests open it with the operators' API) that
// asks a small proof of work, so that the SDK pays one under Node in its
// own thread and in Chromium in workers.
const sdkEvents = `  - id: "premiere"
    name: "Premiere night"
    venue: "Shinjuku Hall 3"
    mode: "paused"
    admission: {admit_per_second: 20, max_active: 20, access_ttl: "5m", abandon_after: "60s", join_proof_bits: 10}
    showtimes:
      - {id: 42, title: "Premiere 19:00", starts_at: "2036-12-01T19:00:00+09:00", rows: 5, seats_per_row: 10, price_cents: 1500}
`

// typescriptVersion is the TypeScript the SDK's types are checked with: a
// test-only dependency, installed from the npm registry into a cache folder
// outside the repository, as axe-core is.
const typescriptVersion = "5.9.3"

// sdkFromGateway saves the SDK's files as the gateway serves them into dir,
// after checking how it serves them: a module, its types, cached a while.
func sdkFromGateway(t *testing.T, gateway, dir string) {
	t.Helper()
	for name, ctype := range map[string]string{"waitroom.js": "text/javascript", "waitroom.d.ts": "application/typescript"} {
		res, err := http.Get(gateway + "/sdk/" + name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) || res.Header.Get("Cache-Control") != "public, max-age=300" {
			t.Fatalf("GET /sdk/%s: %d %s, Cache-Control %q, %v; want 200 %s, public, max-age=300", name, res.StatusCode,
				res.Header.Get("Content-Type"), res.Header.Get("Cache-Control"), err, ctype)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing else is served there: not a file it lacks, not one beside it.
	for _, p := range []string{"/sdk/nope.js", "/sdk/../static/app.css", "/sdk/%2e%2e/static/app.css", "/sdk/"} {
		res, err := http.Get(gateway + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d; want 404", p, res.StatusCode)
		}
	}
}

// TestSDKUnderNode runs the SDK (/sdk/waitroom.js, as the gateway serves
// it) under Node against the real stack, with testdata/sdk/node.mjs: a
// join that pays the proof of work, a place taken over from its ticket,
// a step away and a refused one, Redis stopped while the fan waits (503s
// with Retry-After, the place kept) and started again, the sale opened,
// the pass (it opens the booking API), leaving; polls never sooner than
// told; the changes in order.
func TestSDKUnderNode(t *testing.T) {
	t.Parallel()
	node, err := localsvc.Ensure("node", "nodejs")
	if err != nil {
		t.Fatal(err)
	}
	sink, err := mailsink.Start(mailsink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	site := newPresaleSite(t)
	s := stack.Start(t, stack.Options{Events: sdkEvents, RedisAOF: true, AdminToken: opsToken, AccountKeysFile: site.file,
		Notify: fmt.Sprintf(`{smtp_url: %q, from: "waitroom <noreply@example.com>", timeout: "1s"}`, "smtp://"+sink.Addr)})
	token := func(acct string) string {
		tok, err := account.MintWithEmail(site.priv, acct, "", acct+"@example.test", time.Now(), 30*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	dir := t.TempDir()
	sdkFromGateway(t, s.Gateway, dir)
	script, err := os.ReadFile(filepath.Join("testdata", "sdk", "node.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "node.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WAITROOM_URL="+s.Gateway, "WAITROOM_EVENT=premiere", "WAITROOM_SHOWTIME=42",
		"ACCOUNT_A="+token("aiko"), "ACCOUNT_B="+token("bora"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The steps the script takes, and what this side does at some of them.
	var steps []string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		var step struct {
			Step, Msg, Changes string
		}
		if err := json.Unmarshal(lines.Bytes(), &step); err != nil {
			t.Errorf("node printed %q", lines.Text())
			continue
		}
		steps = append(steps, step.Step)
		t.Logf("node: %s", lines.Text())
		switch step.Step {
		case "outage":
			s.Redis.Kill()
		case "offline":
			if err := s.Redis.Start(ctx); err != nil {
				t.Fatalf("start redis again: %v", err)
			}
		case "back":
			if code, out := admin(t, s.Gateway, http.MethodPatch, "/api/v1/admin/events/premiere", map[string]any{"mode": "queue"}); code != http.StatusOK {
				t.Fatalf("open the sale: %d %v", code, out)
			}
		case "fail":
			t.Errorf("node: %s", step.Msg)
		}
	}
	err = cmd.Wait()
	want := []string{"waiting", "resumed", "away", "outage", "offline", "back", "admitted", "done"}
	if err != nil || !slices.Equal(steps, want) {
		t.Fatalf("node.mjs: %v; steps %v, want %v\n%s", err, steps, want, stderr.String())
	}
}

// TestSDKTypes checks waitroom.d.ts against the module: it names exactly
// the values waitroom.js exports, and a TypeScript program that uses the
// whole API (testdata/sdk/usage.ts) compiles against it under --strict.
func TestSDKTypes(t *testing.T) {
	t.Parallel()
	node, err := localsvc.Ensure("node", "nodejs")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"waitroom.js", "waitroom.d.ts"} {
		b, err := fs.ReadFile(web.SDK(), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(node, "--input-type=module", "-e",
		`const m = await import(process.argv[1]); console.log(Object.keys(m).sort().join(' '))`, filepath.Join(dir, "waitroom.js")).CombinedOutput()
	if err != nil {
		t.Fatalf("import waitroom.js: %v\n%s", err, out)
	}
	types, err := os.ReadFile(filepath.Join(dir, "waitroom.d.ts"))
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, m := range regexp.MustCompile(`(?m)^export (?:class|function) (\w+)`).FindAllStringSubmatch(string(types), -1) {
		declared = append(declared, m[1])
	}
	slices.Sort(declared)
	if got := strings.Fields(string(out)); !slices.Equal(got, slices.Compact(declared)) {
		t.Errorf("waitroom.js exports %v; waitroom.d.ts declares %v", got, declared)
	}

	usage, err := os.ReadFile(filepath.Join("testdata", "sdk", "usage.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "usage.ts"), usage, 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := localsvc.NPMPackage("typescript", typescriptVersion)
	if err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(node, filepath.Join(ts, "node_modules", "typescript", "bin", "tsc"), "--noEmit", "--strict", "--target", "es2022", "--module", "es2022",
		"--moduleResolution", "bundler", "--lib", "es2022,dom", filepath.Join(dir, "usage.ts")).CombinedOutput()
	if err != nil {
		t.Fatalf("tsc over a program using the SDK: %v\n%s", err, out)
	}
}

// TestBrowserSDKInAnApp runs the README's single-page app (its html block,
// as a reader copies it) in Chromium, served with the room behind one nginx
// running docs/sdk/nginx.conf as it is but for its addresses: the app's
// host serves the app, /sdk/ and /api/v1/ (the supported setup: the SDK's
// requests are same-origin; the room adds no CORS). The app joins a paused
// sale (the SDK pays the proof of work in workers), shows the place, is
// admitted when the sale opens, resumes its place on a reload, and leaves.
func TestBrowserSDKInAnApp(t *testing.T) {
	t.Parallel()
	s := stack.Start(t, stack.Options{Events: sdkEvents, AdminToken: opsToken, TrustedProxies: []string{"127.0.0.1/32"}})
	// The app's folder: nginx's workers (another user) read it.
	app, err := os.MkdirTemp("", "wr-app-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(app) })
	if err := os.Chmod(app, 0o755); err != nil {
		t.Fatal(err)
	}
	page := readmeBlock(t, "html", "<!doctype html>")
	if err := os.WriteFile(filepath.Join(app, "index.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := startDocsNginx(t, filepath.Join("sdk", "nginx.conf"), [2]string{"listen 8091;", "listen {addr};"},
		[2]string{"127.0.0.1:8080", strings.TrimPrefix(s.Gateway, "http://")}, [2]string{"root /srv/app;", "root " + app + ";"})
	origin := "http://" + addr
	if res, err := http.Get(origin + "/api/v1/admin/events"); err != nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("the operators' routes on the app's host: %v %v; want 404", res, err)
	}

	ctx := tab(t, browser(t))
	run(t, ctx, 30*time.Second, "open the app", chromedp.Navigate(origin+"/"))
	waitEval(t, ctx, 30*time.Second, "in line", `/You are number \d+ in line/.test(document.querySelector('#line').textContent)`)
	if got := metric(t, s.Gateway, `waitroom_join_proofs_total{event="premiere",result="ok"}`); got != 1 {
		t.Errorf("proofs paid: %v; want the app's one", got)
	}
	var kept string
	run(t, ctx, 5*time.Second, "the ticket kept", chromedp.Evaluate(`localStorage.getItem('waitroom:ticket:premiere') || ''`, &kept))
	var ticket struct{ Ticket string }
	if err := json.Unmarshal([]byte(kept), &ticket); err != nil || ticket.Ticket == "" {
		t.Fatalf("the app's storage keeps %q; want the ticket", kept)
	}

	if code, out := admin(t, s.Gateway, http.MethodPatch, "/api/v1/admin/events/premiere", map[string]any{"mode": "queue"}); code != http.StatusOK {
		t.Fatalf("open the sale: %d %v", code, out)
	}
	waitEval(t, ctx, 30*time.Second, "admitted", `/Your turn!/.test(document.querySelector('#line').textContent)`)
	// A reload resumes the place (the same ticket, no proof to pay).
	run(t, ctx, 10*time.Second, "reload", chromedp.Reload())
	waitEval(t, ctx, 30*time.Second, "admitted again", `/Your turn!/.test(document.querySelector('#line').textContent)`)
	if got := metric(t, s.Gateway, `waitroom_join_proofs_total{event="premiere",result="ok"}`); got != 1 {
		t.Errorf("proofs paid after the reload: %v; want still 1", got)
	}
	run(t, ctx, 10*time.Second, "leave", chromedp.Click("#leave", chromedp.ByQuery))
	waitEval(t, ctx, 10*time.Second, "left", `/You left the line/.test(document.querySelector('#line').textContent)`)
	res, err := http.Get(s.Gateway + "/api/v1/events/premiere/tickets/" + ticket.Ticket)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusGone {
		t.Errorf("the ticket after leaving: %d; want 410", res.StatusCode)
	}
	if errs := consoleOf(ctx).list(); len(errs) > 0 {
		t.Errorf("the app reported errors: %q", errs)
	}
}

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/waitroom/waitroom/internal/testsupport/apicheck"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// hostile is an attacker's HTTP client: its connections come from
// 127.0.0.2 (still loopback, to the gateway on 127.0.0.1), so the per-IP
// join limit sees it apart from the fans on 127.0.0.1.
func hostileClient() *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	// Its answers are validated against the OpenAPI document too
	// (apicheck): every hostile answer is one the document lists.
	return &http.Client{Timeout: 10 * time.Second, Transport: apicheck.Transport(&http.Transport{
		DialContext: dialer.DialContext, MaxIdleConns: 64, MaxIdleConnsPerHost: 64,
	})}
}

// attack is one class of hostile request, repeated n times by a few
// workers; every answer must be want (with Retry-After when 429 or 503).
type attack struct {
	name string
	n    int
	want []int
	req  func(i int) *http.Request
	// raw, when set, replaces req: for requests net/http will not send.
	raw func(i int) (int, error)
	// reset tolerates the gateway closing the connection mid-body: it
	// answers 413 as soon as the body passes the limit and closes without
	// draining, so a client still writing may see the reset first.
	reset bool
}

type attackResult struct {
	codes map[int]int
	bad   []string
	took  time.Duration
}

func (a attack) run(hc *http.Client, workers int) attackResult {
	res := attackResult{codes: map[int]int{}}
	var mu sync.Mutex
	next := make(chan int)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				code, retry, err := a.do(hc, i)
				problem := ""
				switch {
				case err != nil && a.reset && isReset(err):
					code = -1 // closed by the gateway mid-body
				case err != nil:
					problem = err.Error()
				default:
					ok := false
					for _, w := range a.want {
						ok = ok || code == w
					}
					switch {
					case !ok:
						problem = "unexpected status"
					case (code == 429 || code == 503) && !retry:
						problem = "no Retry-After"
					}
				}
				mu.Lock()
				res.codes[code]++
				if problem != "" && len(res.bad) < 5 {
					res.bad = append(res.bad, fmt.Sprintf("#%d → %d: %s", i, code, problem))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range a.n {
		next <- i
	}
	close(next)
	wg.Wait()
	res.took = time.Since(t0)
	return res
}

func (a attack) do(hc *http.Client, i int) (int, bool, error) {
	if a.raw != nil {
		code, err := a.raw(i)
		return code, true, err
	}
	resp, err := hc.Do(a.req(i))
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("Retry-After") != "", nil
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// declaredTooLarge sends only the head of a POST whose Content-Length says
// 1 MiB and reads the answer: the gateway must refuse on the declared length
// alone, without waiting for (or reading) the body.
func declaredTooLarge(gateway, path, token string) (int, error) {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	addr := strings.TrimPrefix(gateway, "http://")
	c, err := dialer.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

func newReq(method, url, token string, body []byte) *http.Request {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// forgedTokens are passes an attacker could make: garbage, alg none, HMAC
// keyed with a guess, EdDSA signed by another key under the real kid, and the
// real pass with its claims edited.
func forgedTokens(t *testing.T, real, kid, ticketID string) []string {
	t.Helper()
	claims := jwt.MapClaims{
		"iss": "waitroom", "aud": "booking", "sub": ticketID, "evt": drillEvent,
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, claims)
	none.Header["kid"] = kid
	noneTok, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	hs.Header["kid"] = kid
	hsTok, err := hs.SignedString([]byte(kid))
	if err != nil {
		t.Fatal(err)
	}
	other := testenv.Ed25519Key(t)
	ed := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	ed.Header["kid"] = kid
	edTok, err := ed.SignedString(other)
	if err != nil {
		t.Fatal(err)
	}
	// The real pass, its payload swapped for one naming another ticket.
	parts := strings.Split(real, ".")
	payload, _ := json.Marshal(map[string]any{"iss": "waitroom", "aud": "booking", "sub": "zz.forged", "evt": drillEvent, "exp": time.Now().Add(time.Hour).Unix()})
	edited := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]
	return []string{"garbage", "a.b.c", noneTok, hsTok, edTok, edited, real + "x"}
}

// faultHostile: forged tickets, forged passes, oversized bodies, malformed
// JSON, and 10,000 joins from one address (joins_per_ip_per_minute set),
// all while a sale runs. The service stays up, every hostile answer is the
// contract's status, and the fans' sale ends with the invariants intact.
func faultHostile(t *testing.T) {
	ctx := context.Background()
	const rate, maxActive, perIP = 50, 500, 300
	d := startDrill(t, stack.Options{JoinsPerIP: perIP}, rate, maxActive)
	r := d.sale(100, time.Second, 45*time.Second)
	hc := hostileClient()
	t.Cleanup(hc.CloseIdleConnections)
	gw := d.s.Gateway

	// An insider: a real ticket and, once admitted, a real pass, to be
	// tampered with and to carry malformed bodies past the gate.
	join := func() (string, error) {
		res, err := hc.Do(newReq(http.MethodPost, gw+"/api/v1/events/"+drillEvent+"/tickets", "", nil))
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		var a ticketAnswer
		if err := json.NewDecoder(res.Body).Decode(&a); err != nil || res.StatusCode != 201 {
			return "", fmt.Errorf("join: %d %v", res.StatusCode, err)
		}
		return a.Ticket, nil
	}
	ticket, err := join()
	if err != nil {
		t.Fatal(err)
	}
	var token string
	if _, ok := waitFor(30*time.Second, func() bool {
		res, err := hc.Do(newReq(http.MethodGet, gw+"/api/v1/events/"+drillEvent+"/tickets/"+ticket, "", nil))
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var a ticketAnswer
		_ = json.NewDecoder(res.Body).Decode(&a)
		token = a.AccessToken
		return token != ""
	}); !ok {
		t.Fatal("the insider was never admitted")
	}
	var kid, sub string
	if tok, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{}); err == nil {
		kid, _ = tok.Header["kid"].(string)
		sub, _ = tok.Claims.(jwt.MapClaims)["sub"].(string)
	}
	forged := forgedTokens(t, token, kid, sub)
	tampered := []string{
		"", "x", strings.Repeat("A", 500), ticket[:len(ticket)-1] + flip(ticket[len(ticket)-1]),
		flip(ticket[0]) + ticket[1:], ticket + ".", "../../etc/passwd", "%00",
	}
	big := bytes.Repeat([]byte("a"), 1<<20)
	hugeHold := append([]byte(`{"seats":["`), bytes.Repeat([]byte("A1\",\""), 40000)...)
	hugeHold = append(hugeHold, []byte(`A2"]}`)...)
	malformed := []string{`{"seats":[`, `{"seats":"A1"}`, `[1,2,3]`, `{"seats":["A1"]}{}`, "\x00\xff", `{"seats":["A1"],"extra":1}`, `nul`}

	attacks := []attack{
		{name: "10,000 joins from one address", n: 10000, want: []int{201, 429}, req: func(int) *http.Request {
			return newReq(http.MethodPost, gw+"/api/v1/events/"+drillEvent+"/tickets", "", nil)
		}},
		{name: "forged and tampered tickets (poll)", n: 2000, want: []int{400, 404}, req: func(i int) *http.Request {
			tk := tampered[i%len(tampered)]
			if tk == "" || strings.ContainsAny(tk, "/%") {
				tk = "v1." + tk // keep the route; the ticket is still bad
			}
			return newReq(http.MethodGet, gw+"/api/v1/events/"+drillEvent+"/tickets/"+tk, "", nil)
		}},
		{name: "forged tickets (leave)", n: 500, want: []int{400}, req: func(i int) *http.Request {
			return newReq(http.MethodDelete, gw+"/api/v1/events/"+drillEvent+"/tickets/"+flip(ticket[0])+ticket[1:], "", nil)
		}},
		{name: "forged passes", n: 2000, want: []int{401}, req: func(i int) *http.Request {
			return newReq(http.MethodGet, fmt.Sprintf("%s/api/v1/booking/showtimes/%d/seats", gw, drillShowtime), forged[i%len(forged)], nil)
		}},
		{name: "join declaring a 1 MiB body", n: 200, want: []int{413}, raw: func(int) (int, error) {
			return declaredTooLarge(gw, "/api/v1/events/"+drillEvent+"/tickets", "")
		}},
		{name: "hold declaring a 1 MiB body, real pass", n: 200, want: []int{413}, raw: func(int) (int, error) {
			return declaredTooLarge(gw, fmt.Sprintf("/api/v1/booking/showtimes/%d/holds", drillShowtime), token)
		}},
		{name: "1 MiB join bodies sent", n: 50, want: []int{413}, reset: true, req: func(int) *http.Request {
			return newReq(http.MethodPost, gw+"/api/v1/events/"+drillEvent+"/tickets", "", big)
		}},
		{name: "200 KB hold bodies sent, real pass", n: 50, want: []int{413}, reset: true, req: func(int) *http.Request {
			return newReq(http.MethodPost, fmt.Sprintf("%s/api/v1/booking/showtimes/%d/holds", gw, drillShowtime), token, hugeHold)
		}},
		{name: "malformed JSON holds with a real pass", n: 1000, want: []int{400}, req: func(i int) *http.Request {
			return newReq(http.MethodPost, fmt.Sprintf("%s/api/v1/booking/showtimes/%d/holds", gw, drillShowtime), token, []byte(malformed[i%len(malformed)]))
		}},
		{name: "unsigned payment callbacks", n: 500, want: []int{401}, req: func(i int) *http.Request {
			return newReq(http.MethodPost, gw+"/api/v1/booking/payments/callback", "", []byte(`{"paymentId":"pay_x","status":"SUCCEEDED"}`))
		}},
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	results := map[string]attackResult{}
	t0 := time.Now()
	for _, a := range attacks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := a.run(hc, 4)
			mu.Lock()
			results[a.name] = res
			mu.Unlock()
		}()
	}
	wg.Wait()
	flood := since(t0)

	out := r.wait()
	d.alive("gateway", "booking", "admitter")
	f := d.checkInvariants(ctx)
	d.tally.checkClean(t)
	var lines []string
	for _, a := range attacks {
		res := results[a.name]
		if len(res.bad) > 0 {
			t.Errorf("%s: answers outside %v: %v (all: %v)", a.name, a.want, res.bad, res.codes)
		}
		lines = append(lines, fmt.Sprintf("%s → %v in %s", a.name, res.codes, res.took.Round(10*time.Millisecond)))
	}
	joins := results[attacks[0].name].codes
	if joins[201] > 2*perIP || joins[429] < attacks[0].n-2*perIP {
		t.Errorf("10,000 joins from one address with a limit of %d/min: %v", perIP, joins)
	}
	t.Logf("SUMMARY hostile: %d hostile requests in %s while 100 fans bought: %s; fans' outcomes %v; fans' answers all in the contract; %s",
		total(attacks), flood, strings.Join(lines, "; "), out, f)
}

func total(as []attack) int {
	n := 0
	for _, a := range as {
		n += a.n
	}
	return n
}

// flip changes one character of a ticket to another of the same alphabet.
func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

package rehearsal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Client is the simulated fans' HTTP client of one room: fasthttp
// connection pools to its gateway, counting every answer by status.
//
// A room counts joins per address (gateway.joins_per_ip_per_minute, 30 in
// the shipped config), and a real sale's fans come from as many addresses.
// On a room at a loopback address the fans are therefore spread over
// loopback source addresses (127.0.0.2, 127.0.0.3, …: the whole 127/8 is
// this machine's on Linux), FansPerAddress to each, one pool per address.
// Elsewhere every fan comes from this machine's one address.
type Client struct {
	base    string // scheme://host[:port][/prefix], no trailing slash
	pools   []*fasthttp.HostClient
	perPool int
	pay     *http.Client // the payment provider's hosted page, another origin

	start    time.Time
	requests atomic.Int64
	netErrs  atomic.Int64
	byStatus [600]atomic.Int64
	perSec   []atomic.Int64 // requests sent in each second since start
}

// ClientOptions shape a Client.
type ClientOptions struct {
	// Fans is how many fans the client serves (fan indexes 0…Fans-1).
	Fans int
	// FansPerAddress spreads the fans of a loopback room over loopback
	// source addresses, this many to each (0 = all from one address).
	FansPerAddress int
	// MaxConns bounds the connections to the gateway (default 1024).
	MaxConns int
	// Span is how long requests are counted second by second (for
	// RequestsBetween; default 10 minutes).
	Span time.Duration
}

// ErrNotLoopback is NewClient's answer to FansPerAddress for a room that
// is not at a loopback address.
var ErrNotLoopback = errors.New("rehearsal: fans can be spread over source addresses only on a loopback room")

// NewClient is a client of the room at rawURL (http or https; a path is
// kept as a prefix of every route).
func NewClient(rawURL string, o ClientOptions) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("rehearsal: %q is not an http(s) URL", rawURL)
	}
	if o.MaxConns == 0 {
		o.MaxConns = 1024
	}
	if o.Span == 0 {
		o.Span = 10 * time.Minute
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	c := &Client{
		base:   u.Scheme + "://" + u.Host + strings.TrimSuffix(u.EscapedPath(), "/"),
		pay:    &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		start:  time.Now(),
		perSec: make([]atomic.Int64, int(o.Span/time.Second)+1),
	}
	pool := func(dial fasthttp.DialFunc, maxConns int) *fasthttp.HostClient {
		return &fasthttp.HostClient{
			Addr: addr, IsTLS: u.Scheme == "https", Dial: dial, MaxConns: maxConns,
			MaxConnWaitTimeout: 30 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		}
	}
	if o.FansPerAddress <= 0 || o.Fans <= o.FansPerAddress {
		c.pools, c.perPool = []*fasthttp.HostClient{pool(nil, o.MaxConns)}, max(o.Fans, 1)
		return c, nil
	}
	to, ok := loopbackV4(u.Hostname())
	if !ok {
		return nil, ErrNotLoopback
	}
	target := net.JoinHostPort(to.String(), port)
	n := (o.Fans + o.FansPerAddress - 1) / o.FansPerAddress
	for i := range n {
		from := SourceAddress(i)
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}, Timeout: 10 * time.Second}
		dial := func(string) (net.Conn, error) { return d.Dial("tcp4", target) }
		c.pools = append(c.pools, pool(dial, max(4, min(o.FansPerAddress, o.MaxConns/n+1))))
	}
	c.perPool = o.FansPerAddress
	return c, nil
}

// SourceAddress is the loopback address pool i's fans come from:
// 127.0.0.2 for the first, then on (127.0.0.1 is left to everything else
// on the machine).
func SourceAddress(i int) netip.Addr {
	v := uint32(0x7f000002) + uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// loopbackV4 is the IPv4 loopback address host stands for: itself, or
// 127.0.0.1 for "localhost".
func loopbackV4(host string) (netip.Addr, bool) {
	if strings.EqualFold(host, "localhost") {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), true
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Unmap().Is4() || !a.IsLoopback() {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// IsLoopback reports whether the room at rawURL is on this machine: its
// host is "localhost" or a loopback address (127.0.0.0/8, ::1). A name is
// never looked up: a name that resolves to a loopback address elsewhere
// is not loopback here.
func IsLoopback(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// Base is the room's URL as the client reaches it.
func (c *Client) Base() string { return c.base }

// Started is when the client was made: second 0 of RequestsBetween.
func (c *Client) Started() time.Time { return c.start }

// Close lets the client's idle connections go.
func (c *Client) Close() {
	for _, p := range c.pools {
		p.CloseIdleConnections()
	}
	c.pay.CloseIdleConnections()
}

// Request is one call of the room's API.
type Request struct {
	Method, Path string
	Token        string // Authorization: Bearer (the access pass, or the operators' token)
	Idempotency  string // Idempotency-Key
	Proof        string // X-Waitroom-Proof
	Body         any    // sent as JSON when not nil
	// Uncounted: the rehearsal's own question (whether a place was in the
	// lottery), not a fan's request; its answer is left out of Counts.
	Uncounted bool
}

// Answer is the room's answer.
type Answer struct {
	Status     int
	Body       []byte
	RetryAfter time.Duration
}

// Error is the room's error code ({"error": …}), "" when there is none.
func (a Answer) Error() string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(a.Body, &e)
	return e.Error
}

// Do sends r for fan (an index given to NewClient; -1 for the
// rehearsal's own calls) and counts the answer.
func (c *Client) Do(ctx context.Context, fan int, r Request) (Answer, error) {
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.Header.SetMethod(r.Method)
	req.SetRequestURI(c.base + r.Path)
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	if r.Idempotency != "" {
		req.Header.Set("Idempotency-Key", r.Idempotency)
	}
	if r.Proof != "" {
		req.Header.Set("X-Waitroom-Proof", r.Proof)
	}
	if r.Body != nil {
		b, err := json.Marshal(r.Body)
		if err != nil {
			return Answer{}, err
		}
		req.Header.SetContentType("application/json")
		req.SetBody(b)
	}
	if !r.Uncounted {
		c.sent()
	}
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.pool(fan).DoDeadline(req, res, deadline); err != nil {
		if !r.Uncounted && !over(ctx) {
			c.netErrs.Add(1)
		}
		return Answer{}, err
	}
	a := Answer{Status: res.StatusCode(), Body: append([]byte(nil), res.Body()...)}
	if !r.Uncounted {
		c.answered(a.Status)
	}
	if s, err := strconv.Atoi(string(res.Header.Peek("Retry-After"))); err == nil {
		a.RetryAfter = time.Duration(s) * time.Second
	}
	return a, nil
}

// PressPay presses Pay on the provider's hosted page at paymentURL
// (absolute, or relative to the room), as a fan does: a form post that
// the provider answers 303, back to the room's booking page.
func (c *Client) PressPay(ctx context.Context, paymentURL string) (int, error) {
	u, err := url.Parse(paymentURL)
	if err != nil {
		return 0, err
	}
	if !u.IsAbs() {
		base, _ := url.Parse(c.base + "/")
		u = base.ResolveReference(u)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader("action=pay"))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c.sent()
	res, err := c.pay.Do(req)
	if err != nil {
		if !over(ctx) {
			c.netErrs.Add(1)
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	c.answered(res.StatusCode)
	return res.StatusCode, nil
}

// over reports whether ctx has ended, or is at its deadline: a request cut
// by the rehearsal's own end is no fault of the room, and is not counted.
// (The deadline is the request's too, so the request may time out a
// moment before ctx says so.)
func over(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

func (c *Client) pool(fan int) *fasthttp.HostClient {
	if fan < 0 || len(c.pools) == 1 {
		return c.pools[0]
	}
	return c.pools[(fan/c.perPool)%len(c.pools)]
}

func (c *Client) sent() {
	c.requests.Add(1)
	if i := int(time.Since(c.start) / time.Second); i >= 0 && i < len(c.perSec) {
		c.perSec[i].Add(1)
	}
}

func (c *Client) answered(status int) {
	if status >= 0 && status < len(c.byStatus) {
		c.byStatus[status].Add(1)
	}
}

// Counts are the client's requests so far and how they were answered.
type Counts struct {
	Requests, TransportErrors int64
	ByStatus                  map[int]int64 // answers by HTTP status
}

// Class sums the answers of one class: 4 for 4xx, 5 for 5xx.
func (c Counts) Class(hundreds int) int64 {
	var n int64
	for s, k := range c.ByStatus {
		if s/100 == hundreds {
			n += k
		}
	}
	return n
}

// Counts reads the counters.
func (c *Client) Counts() Counts {
	out := Counts{Requests: c.requests.Load(), TransportErrors: c.netErrs.Load(), ByStatus: map[int]int64{}}
	for s := range c.byStatus {
		if n := c.byStatus[s].Load(); n > 0 {
			out.ByStatus[s] = n
		}
	}
	return out
}

// RequestsBetween is the mean requests per second the client sent in
// [from, to) after it was made.
func (c *Client) RequestsBetween(from, to time.Duration) float64 {
	a, b := max(0, int(from/time.Second)), min(len(c.perSec), int(to/time.Second))
	if b <= a {
		return 0
	}
	var n int64
	for i := a; i < b; i++ {
		n += c.perSec[i].Load()
	}
	return float64(n) / float64(b-a)
}

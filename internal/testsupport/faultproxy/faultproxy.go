// Package faultproxy is a TCP proxy for tests that puts a network fault
// between two parts of waitroom (docs/RELIABILITY.md, "Network faults"):
// added latency, a reset of every open connection, a black hole that
// silently swallows the connections open at that moment, and a partition
// that stops every byte both ways for a while and then lets the held bytes
// through, as TCP would once the network heals.
//
// Hand-written rather than toxiproxy as a library: these four faults are a
// page of code, toxiproxy brings its HTTP API, its own logging and metrics
// with it, and a stack of processes already has everything else it needs.
package faultproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards every connection made to Addr to its target.
type Proxy struct {
	Addr   string // host:port to connect to instead of the target
	target string
	ln     net.Listener

	latency atomic.Int64 // added to every chunk sent back to the client (ns)

	mu      sync.Mutex
	conns   map[*link]struct{}
	stalled chan struct{} // non-nil during a partition; closed when it heals
}

// link is one proxied connection: the client's side and the target's.
type link struct {
	client, server net.Conn
	dead           atomic.Bool // black-holed: whatever comes is dropped
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[*link]struct{}{}}
	go p.accept()
	return p, nil
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Heal()
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.client.Close()
		l.server.Close()
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	p.wait()
	s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	l := &link{client: c, server: s}
	p.mu.Lock()
	p.conns[l] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(l, s, c, true) }()
	go func() { defer wg.Done(); p.pump(l, c, s, false) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

// pump copies src to dst chunk by chunk, each through the fault in force;
// back is the direction to the client, where latency is added: each chunk
// is held until latency after it was read, on its own (a reader apart from
// the writer: chunks that follow close behind are not delayed twice, as
// they would be by a slow link rather than a long one).
func (p *Proxy) pump(l *link, src, dst net.Conn, back bool) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	chunks := make(chan chunk, 64)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				due := time.Now()
				if back {
					due = due.Add(time.Duration(p.latency.Load()))
				}
				chunks <- chunk{buf[:n], due}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		p.wait()
		time.Sleep(time.Until(c.due))
		if l.dead.Load() {
			continue
		}
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	// One side ended: end the other (a half-closed proxy would keep the
	// peer waiting for nothing), and let the reader go.
	src.Close()
	dst.Close()
	for range chunks {
	}
}

// wait blocks while a partition holds the network.
func (p *Proxy) wait() {
	p.mu.Lock()
	ch := p.stalled
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// Latency adds d to every chunk sent back to the client, until Heal (0:
// none).
func (p *Proxy) Latency(d time.Duration) { p.latency.Store(int64(d)) }

// Reset resets every open connection (RST to both sides, as a peer or a
// middlebox that lost its state would); new ones go through.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		for _, c := range []net.Conn{l.client, l.server} {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			c.Close()
		}
	}
	return len(p.conns)
}

// BlackHole silently swallows every connection open now, for good: what
// either side sends is dropped, nothing is closed, and each side finds out
// only by its own timeouts (a middlebox that forgot them). New connections
// go through.
func (p *Proxy) BlackHole() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.dead.Store(true)
	}
	return len(p.conns)
}

// Partition stops every byte, both ways, on every connection, new ones
// included (they are accepted, and wait), until Heal; then what was held
// goes through, as TCP delivers it once the network heals.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// Heal ends the latency and the partition (a black hole or a reset is
// over at once: the connections it took are gone).
func (p *Proxy) Heal() {
	p.latency.Store(0)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

// Open is how many connections go through the proxy now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

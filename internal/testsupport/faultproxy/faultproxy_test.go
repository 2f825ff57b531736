package faultproxy_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testsupport/faultproxy"
)

// echo is a line echo server on loopback.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line and reads it back within limit.
func roundTrip(c net.Conn, r *bufio.Reader, limit time.Duration) (time.Duration, error) {
	began := time.Now()
	c.SetDeadline(began.Add(limit))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		err = errors.New("echoed " + strings.TrimSpace(line))
	}
	return time.Since(began), err
}

// Each fault as a client of the proxy sees it.
func TestFaults(t *testing.T) {
	p, err := faultproxy.Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	// fresh dials the proxy again, after fault, and checks a line gets
	// through.
	fresh := func(fault string) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, r := dial()
		if _, err := roundTrip(c, r, time.Second); err != nil {
			t.Fatalf("a new connection after the %s: %v", fault, err)
		}
		return c, r
	}
	// unanswered checks that no answer comes back through c.
	unanswered := func(c net.Conn, r *bufio.Reader, fault string) {
		t.Helper()
		if _, err := roundTrip(c, r, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: %v; want no answer", fault, err)
		}
	}
	c, r := dial()
	if _, err := roundTrip(c, r, time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	p.Latency(200 * time.Millisecond)
	if d, err := roundTrip(c, r, 2*time.Second); err != nil || d < 200*time.Millisecond {
		t.Errorf("with 200 ms latency: %s, %v; want at least 200 ms", d, err)
	}
	p.Heal()

	if n := p.Reset(); n != 1 {
		t.Errorf("reset %d connections; want 1", n)
	}
	if _, err := roundTrip(c, r, time.Second); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Errorf("after a reset: %v; want the connection reset", err)
	}
	c, r = fresh("reset")

	p.BlackHole()
	unanswered(c, r, "black-holed")
	c, r = fresh("black hole")

	p.Partition()
	unanswered(c, r, "partitioned")
	p.Heal()
	// The line sent during the partition arrives once it heals.
	c.SetDeadline(time.Now().Add(time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Errorf("after the partition healed: %q, %v; want the held line", line, err)
	}
}

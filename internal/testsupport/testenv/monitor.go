package testenv

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Monitor counts the commands Redis runs (MONITOR: those the scripts and
// functions call too, each a line such as `… [0 127.0.0.1:5000] "ZADD"
// "key" …`) whose line match says yes, from now until stop is called;
// stop returns the count. addr is the Redis's, rdb a client of it.
func Monitor(t testing.TB, addr string, rdb redis.UniversalClient, match func(line string) bool) (stop func() int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if l, err := r.ReadString('\n'); err != nil || l != "+OK\r\n" {
		t.Fatalf("MONITOR: %q %v", l, err)
	}
	n, off := 0, "monitor-off-"+randHex(8)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			l, err := r.ReadString('\n')
			switch {
			case err != nil:
				return
			case strings.Contains(l, off):
				return
			case match(l):
				n++
			}
		}
	}()
	return func() int {
		// Redis shows the commands in the order it runs them: the marker
		// comes after every command before it.
		rdb.Echo(context.Background(), off)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("MONITOR never showed the end's marker")
		}
		conn.Close()
		return n
	}
}

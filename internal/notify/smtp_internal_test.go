package notify

import (
	"net"
	"testing"
)

// Which mail stays on this machine (may go without STARTTLS): a host named
// as loopback and reached at a loopback address, both.
func TestLoopback(t *testing.T) {
	at := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 25} }
	for _, c := range []struct {
		host   string
		remote net.Addr
		want   bool
	}{
		{"127.0.0.1", at("127.0.0.1"), true},
		{"127.0.0.2", at("127.0.0.2"), true},
		{"localhost", at("127.0.0.1"), true},
		{"localhost", at("::1"), true},
		{"::1", at("::1"), true},
		{"localhost", at("192.0.2.7"), false}, // a localhost that resolved elsewhere
		{"mail.example.com", at("127.0.0.1"), false},
		{"mail.example.com", at("192.0.2.7"), false},
		{"192.0.2.7", at("192.0.2.7"), false},
		{"localhost.example.com", at("127.0.0.1"), false},
		{"0.0.0.0", at("127.0.0.1"), false},
		{"127.0.0.1", &net.UnixAddr{Name: "/tmp/x", Net: "unix"}, false},
	} {
		if got := loopback(c.host, c.remote); got != c.want {
			t.Errorf("loopback(%s, %v) = %v; want %v", c.host, c.remote, got, c.want)
		}
	}
}

package gateway

import (
	"net/netip"
	"testing"
)

func TestJoinBudgetOf(t *testing.T) {
	tests := []struct {
		addr string
		bits int
		want string
	}{
		{"203.0.113.7", 64, "203.0.113.7"},
		{"::ffff:203.0.113.7", 64, "203.0.113.7"},
		{"::ffff:203.0.113.7", 8, "203.0.113.7"},
		{"2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::"},
		{"2001:db8:1:2:3:4:5:6%eth0", 64, "2001:db8:1:2::"},
		{"2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::"},
		{"2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6"},
		{"2001:db8:1:2:3:4:5:6", 1, "::"},
		{"::1", 64, "::"},
	}
	for _, tt := range tests {
		if got := joinBudgetOf(netip.MustParseAddr(tt.addr), tt.bits); got.String() != tt.want {
			t.Errorf("joinBudgetOf(%s, %d) = %s; want %s", tt.addr, tt.bits, got, tt.want)
		}
	}
	if got := joinBudgetOf(netip.Addr{}, 64); got.IsValid() {
		t.Errorf("joinBudgetOf(no address) = %s; want no address", got)
	}
}

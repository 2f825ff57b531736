package rdb

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// config redis.url: a URL is one node, a list of seeds a Cluster.
func TestNewClientFromURL(t *testing.T) {
	cases := []struct {
		url     string
		cluster bool
		bad     bool
	}{
		{"redis://127.0.0.1:6379/0", false, false},
		{"rediss://user:pw@example.com:6380/2", false, false},
		{"10.0.0.1:7000,10.0.0.2:7000, 10.0.0.3:7000", true, false},
		{"10.0.0.1:7000", true, false},
		{"", false, true},
		{" , ", false, true},
		{"redis://host:notaport", false, true},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			rdb, err := newClient(c.url)
			if (err != nil) != c.bad {
				t.Fatalf("newClient(%q) error %v; want error: %v", c.url, err, c.bad)
			}
			if err != nil {
				return
			}
			defer rdb.Close()
			_, isCluster := rdb.(*redis.ClusterClient)
			if isCluster != c.cluster {
				t.Errorf("newClient(%q) = %T; want cluster: %v", c.url, rdb, c.cluster)
			}
		})
	}
}

package testenv

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
)

// Cluster gives this test a private three-master Redis Cluster (empty, no
// other running test's: see pool.go) and a cluster client on its seeds,
// closed when the test ends. cluster.Seeds() is what config redis.url
// takes for it.
func Cluster(t testing.TB) (*localsvc.Cluster, *redis.ClusterClient) {
	t.Helper()
	return ClusterWith(t, 0)
}

// ClusterWith is Cluster with that many replicas per master (failover).
func ClusterWith(t testing.TB, replicas int) (*localsvc.Cluster, *redis.ClusterClient) {
	t.Helper()
	return ClusterOf(t, localsvc.ClusterOptions{Masters: 3, Replicas: replicas})
}

// ClusterOf gives this test a private Redis Cluster shaped by opts (Dir is
// the pool's: pool.go).
func ClusterOf(t testing.TB, opts localsvc.ClusterOptions) (*localsvc.Cluster, *redis.ClusterClient) {
	t.Helper()
	opts.Dir = ""
	c := leaseCluster(t, opts)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 64})
	t.Cleanup(func() { rdb.Close() })
	return c, rdb
}

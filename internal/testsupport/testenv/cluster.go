package testenv

import (
	"testing"
	"time"

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
//
// Its client waits for a reply up to clusterReadTimeout, not go-redis's
// 5 s: a script of the tests that lets 10,000 fans in, and the commands
// queued behind it, can take longer on a loaded machine, and a test waits
// for the answer (one that wants a timeout sets it on its context).
func ClusterOf(t testing.TB, opts localsvc.ClusterOptions) (*localsvc.Cluster, *redis.ClusterClient) {
	t.Helper()
	opts.Dir = ""
	c := leaseCluster(t, opts)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 64,
		ReadTimeout: clusterReadTimeout, WriteTimeout: clusterReadTimeout})
	t.Cleanup(func() { rdb.Close() })
	return c, rdb
}

// clusterReadTimeout is how long a test's cluster client waits for a reply.
const clusterReadTimeout = time.Minute

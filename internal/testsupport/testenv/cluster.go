package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
)

// Cluster starts a private three-master Redis Cluster for this test and
// returns it with a cluster client on its seeds; both are stopped when the
// test ends. cluster.Seeds() is what config redis.url takes for it.
func Cluster(t testing.TB) (*localsvc.Cluster, *redis.ClusterClient) {
	t.Helper()
	return ClusterWith(t, 0)
}

// ClusterWith is Cluster with that many replicas per master (failover).
func ClusterWith(t testing.TB, replicas int) (*localsvc.Cluster, *redis.ClusterClient) {
	t.Helper()
	return ClusterOf(t, localsvc.ClusterOptions{Masters: 3, Replicas: replicas})
}

// ClusterOf starts a private Redis Cluster shaped by opts (Dir is set
// here) for this test.
func ClusterOf(t testing.TB, opts localsvc.ClusterOptions) (*localsvc.Cluster, *redis.ClusterClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts.Dir = tempDir(t)
	c, err := localsvc.StartCluster(ctx, opts)
	if err != nil {
		t.Fatalf("testenv: redis cluster: %v", err)
	}
	t.Cleanup(c.Kill)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 64})
	t.Cleanup(func() { rdb.Close() })
	return c, rdb
}

package testenv

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RedisCPU is the CPU time (seconds) a Redis server has used, from INFO cpu:
// the sum of the named fields (used_cpu_sys and used_cpu_user: the whole
// process; used_cpu_sys_main_thread and used_cpu_user_main_thread: the
// thread that runs every command).
func RedisCPU(tb testing.TB, rdb redis.UniversalClient, fields ...string) float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	found := 0
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for _, f := range fields {
			if k == f {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					tb.Fatalf("INFO cpu: %s", line)
				}
				sum += n
				found++
			}
		}
	}
	if found != len(fields) {
		tb.Fatalf("INFO cpu has %d of the fields %v", found, fields)
	}
	return sum
}

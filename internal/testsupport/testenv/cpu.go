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
	info := redisInfo(tb, rdb, "cpu")
	var sum float64
	found := 0
	for _, f := range fields {
		v, ok := info[f]
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			tb.Fatalf("INFO cpu: %s:%s", f, v)
		}
		sum += n
		found++
	}
	if found != len(fields) {
		tb.Fatalf("INFO cpu has %d of the fields %v", found, fields)
	}
	return sum
}

// RedisInfoInt is the whole number field of a Redis server's INFO section:
// used_memory of "memory", total_reads_processed of "stats".
func RedisInfoInt(tb testing.TB, rdb redis.UniversalClient, section, field string) int64 {
	tb.Helper()
	v, ok := redisInfo(tb, rdb, section)[field]
	if !ok {
		tb.Fatalf("INFO %s has no %s", section, field)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		tb.Fatalf("INFO %s: %s:%s", section, field, v)
	}
	return n
}

// redisInfo is one section of a Redis server's INFO, field by field.
func redisInfo(tb testing.TB, rdb redis.UniversalClient, section string) map[string]string {
	tb.Helper()
	info, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		tb.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

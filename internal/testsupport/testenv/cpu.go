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

// RedisCalls is how many times a Redis server has run command (lower
// case, as INFO commandstats names it: "zadd"), scripts' calls included;
// 0 before its first.
func RedisCalls(tb testing.TB, rdb redis.UniversalClient, command string) int64 {
	tb.Helper()
	return RedisCommandStats(tb, rdb)[command].Calls
}

// CommandStat is one command's line of INFO commandstats: how many times
// it ran and the microseconds it took in all (usec; usec_per_call is their
// ratio), since the server started or the last CONFIG RESETSTAT.
type CommandStat struct {
	Calls int64
	Usec  float64
}

// RedisCommandStats is a Redis server's INFO commandstats, by command
// (lower case: "fcall", "zadd"; a command a script runs is counted as its
// own too).
func RedisCommandStats(tb testing.TB, rdb redis.UniversalClient) map[string]CommandStat {
	tb.Helper()
	out := map[string]CommandStat{}
	for k, v := range redisInfo(tb, rdb, "commandstats") {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var st CommandStat
		for _, f := range strings.Split(v, ",") {
			key, val, _ := strings.Cut(f, "=")
			switch key {
			case "calls":
				st.Calls, _ = strconv.ParseInt(val, 10, 64)
			case "usec":
				st.Usec, _ = strconv.ParseFloat(val, 64)
			}
		}
		out[name] = st
	}
	return out
}

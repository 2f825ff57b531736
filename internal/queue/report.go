package queue

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// The sale's report (DESIGN.md "Transparency"): the figures that show a
// sale was fair, kept from its own records in one HASH under the event's
// tag (wr:{e}:report), written where the facts are known and never on a
// waiting fan's poll:
//
//   - the admission scripts (one per tick) count the fans admitted per
//     minute ("a:<unix minute>") and check FIFO as they go: every
//     post-opening join admitted is compared with the highest sequence
//     number admitted by the ticks before ("maxseq"); a lower one is an
//     inversion ("inversions"): someone who joined later got in earlier;
//   - and the draw's order likewise: every pre-queue entry admitted has its
//     rank read from the draw's rank table (not from its score: a line
//     whose places were changed after the draw is caught too) and compared
//     with the highest rank admitted by the ticks before ("maxrank"); a
//     lower one is a rank inversion ("rankinversions");
//   - after each tick, recordLine notes the line's length ("q:<minute>",
//     the longest seen), the configured rate ("c:<minute>"), how long the
//     line stayed non-empty while open ("b:<minute>", ms) and the first
//     moment the event was sold out ("soldout");
//   - the first poll that sees a ticket admitted (once per fan: it claims
//     the place) adds its wait and its ETA error to two histograms
//     ("w:<tenths of s>", "e:<tenths of s>", two significant digits, so a
//     percentile is within 5 % and the hash stays small).
//
// The counters (joined, admitted, left, abandoned) are the line's own.

// reportPrelude: what the admission scripts record.
const reportPrelude = `
-- The fans one tick admits are let in at one instant, so a tick's order
-- among them is none: a fan is out of order when an earlier tick let in
-- someone who joined after it.
local function fifo_start(report, ranks)
  local m = redis.call('HMGET', report, 'maxseq', 'maxrank')
  local s, r = tonumber(m[1]) or 0, tonumber(m[2]) or 0
  return {before = s, max = s, inv = 0, ranks = ranks, rbefore = r, rmax = r, rinv = 0}
end

local function fifo_admit(f, seq)
  if seq < f.before then f.inv = f.inv + 1 end
  if seq > f.max then f.max = seq end
end

-- a pre-queue entry let in: its rank in the draw (0: none drawn)
local function rank_admit(f, seq)
  local rank = redis.call('BITFIELD_RO', f.ranks, 'GET', 'u32', '#' .. int(seq))[1]
  if rank == 0 then return end
  if rank < f.rbefore then f.rinv = f.rinv + 1 end
  if rank > f.rmax then f.rmax = rank end
end

local function report_admitted(report, f, now, admitted)
  if admitted > 0 then redis.call('HINCRBY', report, 'a:' .. math.floor(now / 60000), admitted) end
  if f.max > f.before then redis.call('HSET', report, 'maxseq', f.max) end
  if f.inv > 0 then redis.call('HINCRBY', report, 'inversions', f.inv) end
  if f.rmax > f.rbefore then redis.call('HSET', report, 'maxrank', f.rmax) end
  if f.rinv > 0 then redis.call('HINCRBY', report, 'rankinversions', f.rinv) end
end
`

// reportLineScript notes, after a tick, the line's length, the rate in
// force, the time the open line was non-empty, and when the event sold out.
//
// KEYS: 1 report, 2 inventory
// ARGV: 1 fans waiting after the tick, 2 configured rate (/s), 3 mode,
// 4 opens_at ms or "", 5 closes_at ms or ""
// Returns 1.
var reportLineScript = lua.Script("report_line", `
local now = clock()
local m = math.floor(now / 60000)
local r = redis.call('HMGET', KEYS[1], 'ts', 'lq', 'q:' .. m)
local ts, lq, q = tonumber(r[1]), tonumber(r[2]) or 0, tonumber(r[3]) or -1
local w = tonumber(ARGV[1])
local opens, closes = tonumber(ARGV[4]), tonumber(ARGV[5])
local open = ARGV[3] ~= 'closed' and ARGV[3] ~= 'paused' and (not opens or now >= opens) and (not closes or now < closes)
if open then
  if ts and lq > 0 and now > ts then redis.call('HINCRBY', KEYS[1], 'b:' .. m, math.min(now - ts, 10000)) end
  redis.call('HSET', KEYS[1], 'c:' .. m, ARGV[2])
  if w > q then redis.call('HSET', KEYS[1], 'q:' .. m, w) end
end
redis.call('HSET', KEYS[1], 'ts', now, 'lq', w)
if inv_soldout(KEYS[2]) then redis.call('HSETNX', KEYS[1], 'soldout', now) end
return 1
`)

// recordLine runs reportLineScript after a tick.
func (s *Store) recordLine(ctx context.Context, event string, set line.Settings, r line.TickResult) error {
	k := rdb.KeysOf(event)
	err := s.c.Run(ctx, rdb.Call{Script: reportLineScript, Keys: []string{k.Report, k.Inventory}, Args: []any{r.Waiting, rateArg(set.AdmitPerSecond), set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt)}}).Err()
	return rdb.Interpret("report", err)
}

// recordWait adds a ticket's wait (from its join, or from opens_at for a
// pre-queue fan: the lottery decided its place, not its arrival) and its
// ETA error (the wait from its join less the ETA told then) to the
// report's histograms. Called once per ticket, by the poll that claimed
// its place; a failure costs one fan's figures, never the fan's answer.
func (s *Store) recordWait(ctx context.Context, event string, st line.Status, set line.Settings) {
	if st.JoinedAt.IsZero() {
		return
	}
	now := s.now()
	from := st.JoinedAt
	if set.OpensAt != nil && from.Before(*set.OpensAt) {
		from = *set.OpensAt
	}
	k := rdb.KeysOf(event).Report
	_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HIncrBy(ctx, k, "w:"+strconv.FormatInt(bucketOf(now.Sub(from)), 10), 1)
		if st.JoinETA != nil {
			p.HIncrBy(ctx, k, "e:"+strconv.FormatInt(bucketOf(now.Sub(st.JoinedAt)-*st.JoinETA), 10), 1)
		}
		return nil
	})
}

// bucketOf is d in tenths of a second, rounded to two significant digits.
func bucketOf(d time.Duration) int64 {
	t := int64(math.Round(d.Seconds() * 10))
	sign := int64(1)
	if t < 0 {
		sign, t = -1, -t
	}
	scale := int64(1)
	for t >= 100*scale {
		scale *= 10
	}
	return sign * (t + scale/2) / scale * scale
}

// Report reads event's report.
func (s *Store) Report(ctx context.Context, event string) (line.Report, error) {
	st, err := s.Stats(ctx, event)
	if err != nil {
		return line.Report{}, err
	}
	h, err := s.c.HGetAll(ctx, rdb.KeysOf(event).Report).Result()
	if err != nil {
		return line.Report{}, rdb.Interpret("report", err)
	}
	out := line.Report{Joined: st.Joined, Admitted: st.Admitted, Left: st.Left, Abandoned: st.Abandoned, StraightThrough: st.Through}
	minutes := map[int64]*line.ReportMinute{}
	minute := func(m int64) *line.ReportMinute {
		if x, ok := minutes[m]; ok {
			return x
		}
		x := &line.ReportMinute{At: time.Unix(m*60, 0).UTC()}
		minutes[m] = x
		return x
	}
	waits, etas := map[int64]int64{}, map[int64]int64{}
	for f, v := range h {
		kind, arg, _ := strings.Cut(f, ":")
		n, _ := strconv.ParseInt(arg, 10, 64)
		switch kind {
		case "a":
			minute(n).Admitted, _ = strconv.ParseInt(v, 10, 64)
		case "t":
			minute(n).StraightThrough, _ = strconv.ParseInt(v, 10, 64)
		case "b":
			ms, _ := strconv.ParseInt(v, 10, 64)
			minute(n).Busy = time.Duration(ms) * time.Millisecond
		case "c":
			minute(n).Configured, _ = strconv.ParseFloat(v, 64)
		case "q":
			minute(n).Waiting, _ = strconv.ParseInt(v, 10, 64)
		case "w":
			waits[n], _ = strconv.ParseInt(v, 10, 64)
		case "e":
			etas[n], _ = strconv.ParseInt(v, 10, 64)
		case "inversions":
			out.FIFOInversions, _ = strconv.ParseInt(v, 10, 64)
		case "rankinversions":
			out.RankInversions, _ = strconv.ParseInt(v, 10, 64)
		case "soldout":
			ms, _ := strconv.ParseInt(v, 10, 64)
			t := msToTime(ms).UTC()
			out.SoldOutAt = &t
		}
	}
	if len(minutes) > 0 {
		first, last := int64(math.MaxInt64), int64(math.MinInt64)
		for m := range minutes {
			first, last = min(first, m), max(last, m)
		}
		var admitted int64
		var busy, configured, openConfigured float64
		var open int
		for m := first; m <= last; m++ {
			x := minute(m)
			out.Minutes = append(out.Minutes, *x)
			if x.Busy > 0 {
				admitted += x.Admitted
				busy += x.Busy.Seconds()
				configured += x.Configured * x.Busy.Seconds()
				out.Busy += x.Busy
			}
			if x.Configured > 0 {
				open++
				openConfigured += x.Configured
			}
		}
		switch {
		case busy > 0:
			out.MeanPerSecond = float64(admitted) / busy
			out.ConfiguredPerSecond = configured / busy
		case open > 0:
			// Nobody waited: no pace to measure, but a rate was configured
			// (what the chart's line shows), and the report says so.
			out.ConfiguredPerSecond = openConfigured / float64(open)
		}
	}
	out.Wait, out.ETAError = percentiles(waits), percentiles(etas)
	return out, nil
}

// percentiles reads p50 and p95 off a histogram of tenths of a second.
func percentiles(h map[int64]int64) line.Percentiles {
	var p line.Percentiles
	keys := make([]int64, 0, len(h))
	for k, n := range h {
		keys = append(keys, k)
		p.Count += n
	}
	if p.Count == 0 {
		return p
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a] < keys[b] })
	at := func(q float64) float64 {
		need := int64(math.Ceil(q * float64(p.Count)))
		var cum int64
		for _, k := range keys {
			if cum += h[k]; cum >= need {
				return float64(k) / 10
			}
		}
		return float64(keys[len(keys)-1]) / 10
	}
	p.P50, p.P95 = at(0.50), at(0.95)
	return p
}

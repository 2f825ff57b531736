package opscheck

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Metric types as the Prometheus text format names them.
const (
	counter   = "counter"
	gauge     = "gauge"
	histogram = "histogram"
	summary   = "summary"
)

// agreedMetrics is the metric contract of DESIGN.md plus the extras the team
// agreed on, family name → type. Counters are named as exposed (with _total).
// It stands in for scraping the running binaries (see exportedNames in the
// tests); keep it in step with docs/OPERATIONS.md and the binaries.
var agreedMetrics = map[string]string{
	// gateway: queue gauges read from Redis at scrape, tickets, waits, ETA
	"waitroom_queue_waiting":        gauge,
	"waitroom_queue_active":         gauge,
	"waitroom_tickets_issued_total": counter,
	"waitroom_wait_seconds":         histogram,
	"waitroom_eta_error_seconds":    histogram,
	"waitroom_proxy_errors_total":   counter,
	"waitroom_join_proofs_total":    counter,
	"waitroom_forward_auth_total":   counter,
	// gateway and booking
	"waitroom_http_requests_total":           counter,
	"waitroom_http_request_duration_seconds": histogram,
	// admitter
	"waitroom_admitted_total":                 counter,
	"waitroom_abandoned_total":                counter,
	"waitroom_admit_rate":                     gauge,
	"waitroom_admit_rate_configured":          gauge,
	"waitroom_max_active":                     gauge,
	"waitroom_admitter_tick_duration_seconds": histogram,
	"waitroom_admitter_tick_errors_total":     counter,
	"waitroom_config_reloads_total":           counter,
	"waitroom_config_reload_errors_total":     counter,
	"waitroom_notifications_total":            counter,
	// admitter and gateway: the webhooks
	"waitroom_webhook_deliveries_total": counter,
	// every Redis client
	"waitroom_redis_errors_total":     counter,
	"waitroom_redis_duration_seconds": histogram,
	"waitroom_gate_degraded_total":    counter,
	// booking core
	"booking_holds_total":                    counter,
	"booking_confirmations_total":            counter,
	"booking_outbox_pending":                 gauge,
	"booking_outbox_lag_seconds":             gauge,
	"booking_seats":                          gauge,
	"booking_payments":                       gauge,
	"booking_db_errors_total":                counter,
	"booking_hold_duration_seconds":          histogram,
	"booking_refunds_total":                  counter,
	"booking_inventory_publish_errors_total": counter,
	"booking_inventory_syncs_total":          counter,
}

// prometheusSeries are made by Prometheus itself, not by a target.
var prometheusSeries = []string{
	"up", "scrape_duration_seconds", "scrape_samples_scraped",
	"scrape_samples_post_metric_relabeling", "scrape_series_added",
	"ALERTS", "ALERTS_FOR_STATE",
}

// seriesNames expands metric families into the series names a query can
// select: a histogram foo is foo_bucket, foo_sum and foo_count (never foo),
// a summary is foo, foo_sum and foo_count.
func seriesNames(families map[string]string) map[string]bool {
	out := map[string]bool{}
	for name, typ := range families {
		switch typ {
		case histogram:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case summary:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	return out
}

// parseExposition reads a /metrics page in the Prometheus text format and
// returns its metric families, name → type (untyped samples count as gauges).
// Only what is on the page is there: a labelled metric with no child yet (a
// CounterVec nobody incremented) is not exposed at all.
func parseExposition(r io.Reader) (map[string]string, error) {
	families := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 {
				return nil, fmt.Errorf("exposition line %d: bad TYPE line %q", n, line)
			}
			families[f[2]] = f[3]
		case strings.HasPrefix(line, "#"):
		default:
			name := line
			if i := strings.IndexAny(line, "{ "); i >= 0 {
				name = line[:i]
			}
			if name == "" {
				return nil, fmt.Errorf("exposition line %d: no metric name in %q", n, line)
			}
			if familyOf(families, name) == "" {
				families[name] = gauge
			}
		}
	}
	return families, sc.Err()
}

// familyOf finds the family a sample name belongs to, allowing for the
// _bucket/_sum/_count series of histograms and summaries.
func familyOf(families map[string]string, sample string) string {
	if _, ok := families[sample]; ok {
		return sample
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(sample, suf); ok {
			if t := families[base]; t == histogram || (t == summary && suf != "_bucket") {
				return base
			}
		}
	}
	return ""
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

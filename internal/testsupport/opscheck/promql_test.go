package opscheck

import (
	"reflect"
	"strings"
	"testing"
)

func TestMetricNames(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want []string
	}{
		{"bare", `up`, []string{"up"}},
		{"matchers are not names", `waitroom_queue_waiting{event=~"$event", job!="x"}`, []string{"waitroom_queue_waiting"}},
		{"functions and ranges", `sum by (event) (rate(waitroom_admitted_total{event="a"}[1m]))`, []string{"waitroom_admitted_total"}},
		{"by after the aggregation", `sum(rate(x_total[5m])) by (event, le)`, []string{"x_total"}},
		{"without", `sum without (instance, job) (x)`, []string{"x"}},
		{"clause without spaces", `count by(event)(x) + topk WITHOUT(a)(5, y)`, []string{"x", "y"}},
		{"a metric that looks like an aggregator", `sum + max`, []string{"sum", "max"}},
		{"histogram quantile", `histogram_quantile(0.95, sum by (event, le) (rate(waitroom_wait_seconds_bucket[$__rate_interval])))`,
			[]string{"waitroom_wait_seconds_bucket"}},
		{"vector matching", `a > on (event) group_left(name) max by (event) (b) and ignoring(x) c unless on() d`,
			[]string{"a", "b", "c", "d"}},
		{"set operators and bool", `x == bool 0 or y and z`, []string{"x", "y", "z"}},
		{"keywords in any case", `x AND y OR z UNLESS w`, []string{"x", "y", "z", "w"}},
		{"strings are not names", `label_replace(up, "dst", "$1", "src", "(.*)")`, []string{"up"}},
		{"escaped quote in a string", `count_values("a\"b c", x)`, []string{"x"}},
		{"numbers", `x > 1e-3 and y < 0x1F and z > .5 and w > Inf and v != NaN`, []string{"x", "y", "z", "w", "v"}},
		{"offset and @", `rate(x[5m] offset 1h30m) + y @ 1609746000 + z @ start()`, []string{"x", "y", "z"}},
		{"subquery", `max_over_time(rate(x[1m])[10m:30s])`, []string{"x"}},
		{"__name__ matcher", `{__name__="booking_seats", status="HELD"}`, []string{"booking_seats"}},
		{"grafana variables", `sum by ($group) (rate(x{a="${v:regex}"}[$__rate_interval])) > $threshold`, []string{"x"}},
		{"colons in recording rule names", `job:http_requests:rate5m`, []string{"job:http_requests:rate5m"}},
		{"duplicates once", `a / a`, []string{"a"}},
		{"comments", "x # not_a_metric\n+ y", []string{"x", "y"}},
		{"no metric at all", `vector(1)`, nil},
		{"absent", `up{job="admitter"} == 0 or absent(up{job="admitter"})`, []string{"up"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricNames(tt.expr)
			if err != nil {
				t.Fatalf("metricNames(%q): %v", tt.expr, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("metricNames(%q) = %q; want %q", tt.expr, got, tt.want)
			}
		})
	}
}

func TestMetricNamesMalformed(t *testing.T) {
	for _, expr := range []string{`x{a="b"`, `x{a="b}`, `rate(x[5m)`, `label_replace(x, "a)`} {
		if got, err := metricNames(expr); err == nil {
			t.Errorf("metricNames(%q) = %q, nil; want an error", expr, got)
		}
	}
}

func TestVariableQueryNames(t *testing.T) {
	tests := []struct {
		q    string
		want []string
	}{
		{`label_values(waitroom_queue_waiting, event)`, []string{"waitroom_queue_waiting"}},
		{`label_values(booking_seats{status="HELD"}, showtime)`, []string{"booking_seats"}},
		{`label_values(event)`, nil},
		{`query_result(topk(5, sum by (event) (waitroom_queue_waiting)))`, []string{"waitroom_queue_waiting"}},
		{`label_names()`, nil},
		{`up`, []string{"up"}},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			got, err := variableQueryNames(tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("variableQueryNames(%q) = %q; want %q", tt.q, got, tt.want)
			}
		})
	}
}

func TestSeriesNames(t *testing.T) {
	got := seriesNames(map[string]string{"h": histogram, "s": summary, "c_total": counter, "g": gauge})
	want := []string{"c_total", "g", "h_bucket", "h_count", "h_sum", "s", "s_count", "s_sum"}
	if !reflect.DeepEqual(sortedKeys(got), want) {
		t.Errorf("seriesNames = %q; want %q", sortedKeys(got), want)
	}
}

func TestParseExposition(t *testing.T) {
	page := `# HELP waitroom_wait_seconds Join to admission.
# TYPE waitroom_wait_seconds histogram
waitroom_wait_seconds_bucket{event="premiere",le="1"} 3
waitroom_wait_seconds_bucket{event="premiere",le="+Inf"} 4
waitroom_wait_seconds_sum{event="premiere"} 7.5
waitroom_wait_seconds_count{event="premiere"} 4
# TYPE booking_holds_total counter
booking_holds_total{result="ok"} 12
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.0001
go_gc_duration_seconds_sum 0.002
go_gc_duration_seconds_count 9
untyped_thing 1
`
	fams, err := parseExposition(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"waitroom_wait_seconds":  histogram,
		"booking_holds_total":    counter,
		"go_gc_duration_seconds": summary,
		"untyped_thing":          gauge,
	}
	if !reflect.DeepEqual(fams, want) {
		t.Errorf("parseExposition = %v; want %v", fams, want)
	}
	names := seriesNames(fams)
	for _, n := range []string{"waitroom_wait_seconds_bucket", "booking_holds_total", "go_gc_duration_seconds"} {
		if !names[n] {
			t.Errorf("series %s missing from %q", n, sortedKeys(names))
		}
	}
	if names["waitroom_wait_seconds"] {
		t.Errorf("a histogram has no bare series, yet waitroom_wait_seconds is in %q", sortedKeys(names))
	}
}

func TestMarkdownAnchors(t *testing.T) {
	doc := "# Operations\n## Alerts\n### WaitroomLineStalled\n```\n# not a heading\n```\n## Pause, drain, close\n## Alerts\n"
	got := sortedKeys(markdownAnchors(doc))
	want := []string{"alerts", "alerts-1", "operations", "pause-drain-close", "waitroomlinestalled"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("markdownAnchors = %q; want %q", got, want)
	}
}

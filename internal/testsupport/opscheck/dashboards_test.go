package opscheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// dashboardMetrics lists, per dashboard, the series it must show (the brief
// of each board); a dashboard may show more.
var dashboardMetrics = map[string][]string{
	"waitroom-overview.json": {
		"waitroom_queue_waiting", "waitroom_queue_active", "waitroom_max_active",
		"waitroom_admitted_total", "waitroom_admit_rate_configured", "waitroom_abandoned_total",
		"waitroom_wait_seconds_bucket", "waitroom_eta_error_seconds_bucket", "waitroom_tickets_issued_total",
		"waitroom_notifications_total",
	},
	"waitroom-edge.json": {
		"waitroom_http_requests_total", "waitroom_http_request_duration_seconds_bucket",
		"waitroom_proxy_errors_total", "waitroom_redis_errors_total", "waitroom_redis_duration_seconds_bucket",
		"waitroom_join_proofs_total", "waitroom_gate_degraded_total", "waitroom_forward_auth_total",
		"waitroom_straight_through_total", "waitroom_tickets_issued_total",
	},
	"waitroom-booking.json": {
		"booking_holds_total", "booking_confirmations_total", "booking_seats", "booking_payments",
		"booking_outbox_pending", "booking_outbox_lag_seconds", "booking_refunds_total",
		"booking_db_errors_total", "waitroom_admitter_tick_duration_seconds_bucket",
		"booking_inventory_syncs_total", "booking_inventory_publish_errors_total", "waitroom_gate_degraded_total",
	},
}

const (
	datasourceUID = "${datasource}"
	eventQuery    = "label_values(waitroom_queue_waiting, event)"
)

type dashboard struct {
	file   string
	raw    map[string]any
	exprs  []panelExpr
	vars   map[string]map[string]any
	panels []map[string]any
}

type panelExpr struct {
	panel string
	expr  string
}

func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := dashboard{file: filepath.Base(f), vars: map[string]map[string]any{}}
		if err := json.Unmarshal(b, &d.raw); err != nil {
			t.Fatalf("%s is not valid JSON: %v", d.file, err)
		}
		templating, _ := d.raw["templating"].(map[string]any)
		list, _ := templating["list"].([]any)
		for _, v := range list {
			if m, ok := v.(map[string]any); ok {
				name, _ := m["name"].(string)
				d.vars[name] = m
			}
		}
		var walk func(ps []any)
		walk = func(ps []any) {
			for _, p := range ps {
				pm, ok := p.(map[string]any)
				if !ok {
					continue
				}
				d.panels = append(d.panels, pm)
				title, _ := pm["title"].(string)
				targets, _ := pm["targets"].([]any)
				for _, tg := range targets {
					if tm, ok := tg.(map[string]any); ok {
						expr, _ := tm["expr"].(string)
						d.exprs = append(d.exprs, panelExpr{title, expr})
					}
				}
				if sub, ok := pm["panels"].([]any); ok {
					walk(sub)
				}
			}
		}
		panels, _ := d.raw["panels"].([]any)
		walk(panels)
		out = append(out, d)
	}
	return out
}

func TestDashboards(t *testing.T) {
	boards := loadDashboards(t)
	got := map[string]bool{}
	for _, d := range boards {
		got[d.file] = true
	}
	for f := range dashboardMetrics {
		if !got[f] {
			t.Errorf("dashboards/%s missing", f)
		}
	}
	known := exportedNames(t)
	uids := map[string]string{}
	for _, d := range boards {
		t.Run(d.file, func(t *testing.T) {
			if v, _ := d.raw["schemaVersion"].(float64); v < 38 {
				t.Errorf("schemaVersion = %v; want >= 38", d.raw["schemaVersion"])
			}
			uid, _ := d.raw["uid"].(string)
			if uid == "" {
				t.Error("no uid: provisioning needs a stable one")
			} else if other, dup := uids[uid]; dup {
				t.Errorf("uid %q also used by %s", uid, other)
			}
			uids[uid] = d.file
			if d.raw["id"] != nil {
				t.Errorf("id = %v; want null (Grafana assigns it)", d.raw["id"])
			}
			checkVariables(t, d, known)
			checkDatasources(t, d.file, d.raw)
			checkPanels(t, d)

			used := map[string]bool{}
			for _, pe := range d.exprs {
				names := exportedMetrics(t, fmt.Sprintf("panel %q", pe.panel), pe.expr, known)
				for _, n := range names {
					used[n] = true
				}
				for _, v := range varRefs(pe.expr) {
					if _, ok := d.vars[v]; !ok && !strings.HasPrefix(v, "__") {
						t.Errorf("panel %q uses $%s, which the dashboard does not define", pe.panel, v)
					}
				}
			}
			for _, want := range dashboardMetrics[d.file] {
				if !used[want] {
					t.Errorf("no panel shows %s", want)
				}
			}
		})
	}
}

func checkVariables(t *testing.T, d dashboard, known map[string]bool) {
	t.Helper()
	ds := d.vars["datasource"]
	if ds == nil || ds["type"] != "datasource" || ds["query"] != "prometheus" {
		t.Errorf("variable datasource = %v; want type datasource, query prometheus", ds)
	}
	ev := d.vars["event"]
	if ev == nil || ev["type"] != "query" || varQuery(ev) != eventQuery {
		t.Errorf("variable event query = %q; want %q", varQuery(ev), eventQuery)
	}
	for name, v := range d.vars {
		if v["type"] != "query" {
			continue
		}
		names, err := variableQueryNames(varQuery(v))
		if err != nil {
			t.Errorf("variable %s: %v", name, err)
		}
		if bad := unknownNames(names, known); len(bad) > 0 {
			t.Errorf("variable %s: not exported: %q", name, bad)
		}
	}
}

// varQuery is a query variable's query, stored as a string by older Grafanas
// and as {query: …} by newer ones.
func varQuery(v map[string]any) string {
	switch q := v["query"].(type) {
	case string:
		return q
	case map[string]any:
		s, _ := q["query"].(string)
		return s
	}
	return ""
}

// checkDatasources walks the whole JSON: every datasource reference is the
// ${datasource} variable (or Grafana's built-in annotations), never a
// hard-wired uid that exists only in one Grafana.
func checkDatasources(t *testing.T, file string, v any) {
	t.Helper()
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				p := path + "." + k
				if k == "datasource" {
					switch ds := c.(type) {
					case map[string]any:
						uid, _ := ds["uid"].(string)
						if uid != datasourceUID && uid != "-- Grafana --" {
							t.Errorf("%s: datasource uid %q; want %q", p, uid, datasourceUID)
						}
					case nil:
					default:
						t.Errorf("%s: datasource %v; want {type: prometheus, uid: %q}", p, c, datasourceUID)
					}
				}
				walk(p, c)
			}
		case []any:
			for i, c := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), c)
			}
		}
	}
	walk("", v)
}

func checkPanels(t *testing.T, d dashboard) {
	t.Helper()
	ids := map[float64]bool{}
	for _, p := range d.panels {
		title, _ := p["title"].(string)
		id, _ := p["id"].(float64)
		if ids[id] {
			t.Errorf("panel %q: id %v used twice", title, id)
		}
		ids[id] = true
		if gp, ok := p["gridPos"].(map[string]any); ok {
			x, _ := gp["x"].(float64)
			w, _ := gp["w"].(float64)
			if w <= 0 || x+w > 24 {
				t.Errorf("panel %q: gridPos x=%v w=%v is outside the 24 columns", title, x, w)
			}
		} else {
			t.Errorf("panel %q: no gridPos", title)
		}
		if p["type"] == "row" {
			continue
		}
		if title == "" {
			t.Errorf("a %v panel has no title", p["type"])
		}
		targets, _ := p["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %q: no queries", title)
		}
		refs := map[string]bool{}
		for _, tg := range targets {
			tm, _ := tg.(map[string]any)
			ref, _ := tm["refId"].(string)
			if ref == "" || refs[ref] {
				t.Errorf("panel %q: refId %q empty or repeated", title, ref)
			}
			refs[ref] = true
			if e, _ := tm["expr"].(string); strings.TrimSpace(e) == "" {
				t.Errorf("panel %q: query %s has no expr", title, ref)
			}
		}
	}
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[^}]*)?\}|\$([A-Za-z_][A-Za-z0-9_]*)|\[\[([A-Za-z_][A-Za-z0-9_]*)\]\]`)

func varRefs(expr string) []string {
	var out []string
	for _, m := range varRef.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1]+m[2]+m[3])
	}
	return out
}

// TestDashboardQueriesParse has promtool's PromQL parser read every panel
// query (Grafana's variables replaced by values of the right kind), as
// recording rules in a throwaway rule file.
func TestDashboardQueriesParse(t *testing.T) {
	bin := promtool(t)
	subst := strings.NewReplacer(
		"$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h",
		"${datasource}", "x",
	)
	anyVar := regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*`)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	var where []string
	for _, d := range loadDashboards(t) {
		for _, pe := range d.exprs {
			// Other variables stand in label values and regexes.
			e := anyVar.ReplaceAllString(subst.Replace(pe.expr), "premiere")
			rules = append(rules, rule{Record: fmt.Sprintf("opscheck:q%d", len(rules)), Expr: e})
			where = append(where, d.file+": "+pe.panel)
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboards", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboards.rules.yml")
	writeFile(t, path, b)
	if out, err := run(t, "", nil, bin, "check", "rules", "--lint=none", path); err != nil {
		// Say which panel the failing rule came from.
		idx := regexp.MustCompile(`opscheck:q(\d+)`)
		var hints []string
		for _, m := range idx.FindAllStringSubmatch(out, -1) {
			var i int
			fmt.Sscan(m[1], &i)
			if i < len(where) {
				hints = append(hints, where[i])
			}
		}
		sort.Strings(hints)
		t.Fatalf("promtool rejects a dashboard query: %v\n%s\npanels: %q", err, out, hints)
	}
}

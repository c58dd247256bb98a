package monitoring

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// panel is a Grafana panel; a row holds its panels when collapsed.
type panel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// dashboardExprs returns dashboard.json's PromQL expressions by where they
// are, checking the panels' and the variables' shape on the way.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	var d struct {
		UID        string  `json:"uid"`
		Title      string  `json:"title"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(read(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: want a uid and a title", dashboardFile)
	}
	exprs := map[string]string{}
	labelValues := regexp.MustCompile(`^label_values\((.+), *[a-zA-Z_][a-zA-Z0-9_]*\)$`)
	datasource := false
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			datasource = datasource || v.Name == "datasource" && string(v.Query) == `"prometheus"`
		case "query":
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
			}
			m := labelValues.FindStringSubmatch(q.Query)
			if m == nil {
				t.Fatalf("variable %s: query %q, want label_values(selector, label)", v.Name, q.Query)
			}
			exprs["variable "+v.Name] = m[1]
		}
	}
	if !datasource {
		t.Errorf("%s: no Prometheus datasource variable named datasource", dashboardFile)
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if p.Title == "" || p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("panel %q: want a title, the datasource variable and targets", p.Title)
			}
			for _, tg := range p.Targets {
				where := fmt.Sprintf("panel %q target %s", p.Title, tg.RefID)
				if _, dup := exprs[where]; dup || tg.Expr == "" || tg.RefID == "" {
					t.Errorf("%s: want a refId of its own and an expr", where)
				}
				exprs[where] = tg.Expr
			}
		}
	}
	walk(d.Panels)
	return exprs
}

// grafanaVars replaces the Grafana variables that stand for durations
// with durations promtool accepts; the others are inside label matchers.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// TestDashboard checks that dashboard.json parses, that promtool accepts
// every query, that every metric they name is one the sinks export, and
// that it shows every metric the alerts watch.
func TestDashboard(t *testing.T) {
	exprs := dashboardExprs(t)
	names := exported(t)
	shown := map[string]bool{}
	wheres := slices.Sorted(maps.Keys(exprs))
	for _, where := range wheres {
		checkExported(t, dashboardFile+": "+where, exprs[where], names)
		for _, n := range metricNames(exprs[where]) {
			shown[n] = true
		}
	}
	for _, r := range rules(t) {
		for _, n := range metricNames(r.Expr) {
			if !shown[n] && n != "up" {
				t.Errorf("%s: no panel shows %s, which alert %s watches", dashboardFile, n, r.Alert)
			}
		}
	}
	// promtool parses each query as a recording rule's expression.
	var f ruleFile
	f.Groups = append(f.Groups, struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	}{Name: "dashboard"})
	for i, where := range wheres {
		f.Groups[0].Rules = append(f.Groups[0].Rules, rule{Record: fmt.Sprintf("dashboard:query%d", i), Expr: grafanaVars.Replace(exprs[where])})
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, promtool(t), "check", "rules", "dashboard.yaml")
}

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

// opsFile reads a file of the repository (path relative to its root).
func opsFile(t *testing.T, path ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"..", ".."}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlFile decodes a YAML file of the repository into v.
func yamlFile(t *testing.T, v any, path ...string) {
	t.Helper()
	if err := yaml.Unmarshal(opsFile(t, path...), v); err != nil {
		t.Fatalf("%s: %v", filepath.Join(path...), err)
	}
}

// alertRule is one rule of ops/prometheus/alerts.yml.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// alertRules returns the rules of ops/prometheus/alerts.yml.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	yamlFile(t, &f, "ops", "prometheus", "alerts.yml")
	var out []alertRule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	return out
}

// scrapeConfig is one scrape job of ops/prometheus/prometheus.yml.
type scrapeConfig struct {
	JobName       string `yaml:"job_name"`
	MetricsPath   string `yaml:"metrics_path"`
	Scheme        string `yaml:"scheme"`
	StaticConfigs []struct {
		Targets []string `yaml:"targets"`
	} `yaml:"static_configs"`
}

// scrapeConfigs returns the scrape jobs of ops/prometheus/prometheus.yml.
func scrapeConfigs(t *testing.T) []scrapeConfig {
	t.Helper()
	var f struct {
		ScrapeConfigs []scrapeConfig `yaml:"scrape_configs"`
	}
	yamlFile(t, &f, "ops", "prometheus", "prometheus.yml")
	if len(f.ScrapeConfigs) == 0 {
		t.Fatal("prometheus.yml scrapes nothing")
	}
	return f.ScrapeConfigs
}

// githubAnchor returns the anchor GitHub gives a Markdown heading: lower
// case, every character but letters, digits, spaces, hyphens and
// underscores dropped, spaces turned into hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// markdownAnchors returns the anchors of a Markdown document's headings
// (outside code blocks); a repeated anchor gets -1, -2, … as on GitHub.
func markdownAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fenced || !strings.HasPrefix(line, "#") || !ok {
			continue
		}
		a := githubAnchor(text)
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func TestGithubAnchor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"A class is not served":                   "a-class-is-not-served",
		"Upgrading from tenant-wide subjects":     "upgrading-from-tenant-wide-subjects",
		"What `zerolayer_queue_up` means, (2.0)!": "what-zerolayer_queue_up-means-20",
	} {
		if got := githubAnchor(in); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", in, got, want)
		}
	}
	got := markdownAnchors("# ops\n\n## Runbook\n\n```\n# not a heading\n```\n### Dead letters\n\n### Dead letters\n#nospace\n")
	want := map[string]bool{"ops": true, "runbook": true, "dead-letters": true, "dead-letters-1": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("markdownAnchors = %v, want %v", got, want)
	}
}

// TestOpsRunbookLinks checks that every alert of ops/prometheus/alerts.yml
// has a summary, a severity and a runbook_url that leads to a heading of
// ops/README.md (GitHub's anchor rules), and that no other link to the
// runbook in the alerts or the scrape configuration names a missing
// anchor.
func TestOpsRunbookLinks(t *testing.T) {
	t.Parallel()
	anchors := markdownAnchors(string(opsFile(t, "ops", "README.md")))
	if !anchors["runbook"] || len(anchors) < 10 {
		t.Fatalf("ops/README.md anchors: %v", anchors)
	}
	names := map[string]bool{}
	for _, r := range alertRules(t) {
		if r.Alert == "" || r.Expr == "" {
			t.Errorf("rule %+v: no alert name or expression", r)
			continue
		}
		if names[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		names[r.Alert] = true
		if r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
			t.Errorf("alert %s: no summary or severity", r.Alert)
		}
		raw := r.Annotations["runbook_url"]
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			t.Errorf("alert %s: runbook_url %q is not an absolute https URL", r.Alert, raw)
			continue
		}
		if !strings.HasSuffix(u.Path, "/ops/README.md") {
			t.Errorf("alert %s: runbook_url %q does not lead to ops/README.md", r.Alert, raw)
		}
		if !anchors[u.Fragment] {
			t.Errorf("alert %s: runbook_url anchor #%s is no heading of ops/README.md", r.Alert, u.Fragment)
		}
	}
	// Links in comments and summaries (ops/README.md#anchor).
	link := regexp.MustCompile(`README\.md#([A-Za-z0-9_-]*)`)
	for _, file := range [][]string{{"ops", "prometheus", "alerts.yml"}, {"ops", "prometheus", "prometheus.yml"}} {
		for _, m := range link.FindAllStringSubmatch(string(opsFile(t, file...)), -1) {
			if !anchors[m[1]] {
				t.Errorf("%s links README.md#%s, which is no heading", filepath.Join(file...), m[1])
			}
		}
	}
}

// TestOpsScrapeTargets checks that every scrape job of
// ops/prometheus/prometheus.yml reads an endpoint that serves the
// Prometheus format: the path every service serves its metrics at
// (metricsHandler, asked here with Prometheus's Accept header, answers
// the text format there and nothing at NATS's JSON monitoring paths), on
// a docker-compose.yml service started with --metrics-addr on that port;
// and that alerts.yml tells both when a job's targets are down (up == 0)
// and when it has none (absent).
func TestOpsScrapeTargets(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "zerolayer_test_total", Help: "A test counter."}))
	srv := httptest.NewServer(metricsHandler(reg))
	t.Cleanup(srv.Close)
	serves := func(path string) (bool, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			return false, err.Error()
		}
		// What Prometheus sends when text is all it accepts.
		req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		ct := resp.Header.Get("Content-Type")
		return resp.StatusCode == http.StatusOK && strings.HasPrefix(ct, "text/plain; version=0.0.4"), fmt.Sprintf("%d %s", resp.StatusCode, ct)
	}
	for _, p := range []string{"/varz", "/jsz", "/connz"} {
		if ok, _ := serves(p); ok {
			t.Fatalf("the metrics handler answers %s: the test cannot tell the endpoints apart", p)
		}
	}

	var compose struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	yamlFile(t, &compose, "docker-compose.yml")
	var rules []string
	for _, r := range alertRules(t) {
		rules = append(rules, strings.Join(strings.Fields(r.Expr), ""))
	}
	for _, sc := range scrapeConfigs(t) {
		path := sc.MetricsPath
		if path == "" {
			path = "/metrics" // Prometheus's default
		}
		if ok, got := serves(path); !ok || path != metricsPath {
			t.Errorf("job %s scrapes %s, which does not serve the Prometheus text format (%s); the services serve %s", sc.JobName, path, got, metricsPath)
		}
		if sc.Scheme != "" && sc.Scheme != "http" {
			t.Errorf("job %s: scheme %s, the services serve http", sc.JobName, sc.Scheme)
		}
		n := 0
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				n++
				host, port, err := net.SplitHostPort(target)
				if err != nil {
					t.Errorf("job %s: target %q: %v", sc.JobName, target, err)
					continue
				}
				svc, ok := compose.Services[host]
				if !ok {
					t.Errorf("job %s: target %s is no docker-compose.yml service", sc.JobName, target)
					continue
				}
				i := slices.Index(svc.Command, "--metrics-addr")
				if i < 0 || i+1 >= len(svc.Command) || !strings.HasSuffix(svc.Command[i+1], ":"+port) {
					t.Errorf("job %s: compose service %s does not serve metrics on port %s (command %q)", sc.JobName, host, port, svc.Command)
				}
			}
		}
		if n == 0 {
			t.Errorf("job %s has no target", sc.JobName)
		}
		down := fmt.Sprintf(`up{job="%s"}==0`, sc.JobName)
		absent := fmt.Sprintf(`absent(up{job="%s"})`, sc.JobName)
		if !slices.ContainsFunc(rules, func(e string) bool { return strings.Contains(e, down) }) {
			t.Errorf("no alert on %s", down)
		}
		if !slices.ContainsFunc(rules, func(e string) bool { return strings.Contains(e, absent) }) {
			t.Errorf("no alert on %s", absent)
		}
	}
}

// grafanaDashboard is the part of ops/grafana/dashboards/zerolayer.json
// the tests read.
type grafanaDashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string             `json:"name"`
			Type       string             `json:"type"`
			Datasource *grafanaDatasource `json:"datasource"`
			Query      any                `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	Title      string             `json:"title"`
	Type       string             `json:"type"`
	Datasource *grafanaDatasource `json:"datasource"`
	Targets    []struct {
		Datasource *grafanaDatasource `json:"datasource"`
		Expr       string             `json:"expr"`
		RawSQL     string             `json:"rawSql"`
		Format     string             `json:"format"`
	} `json:"targets"`
}

// readDashboard decodes the zerolayer dashboard.
func readDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	var d grafanaDashboard
	if err := json.Unmarshal(opsFile(t, "ops", "grafana", "dashboards", "zerolayer.json"), &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	return d
}

// TestGrafanaProvisioning checks that every data source the dashboard's
// panels, queries and variables name is provisioned (same uid and type),
// that the dashboard has the instance and model variables and the
// panels the design's monitoring section asks for, and that the Postgres
// data source takes its connection from docker-compose.yml's DATABASE_URL.
func TestGrafanaProvisioning(t *testing.T) {
	t.Parallel()
	var prov struct {
		Datasources []struct {
			Name     string         `yaml:"name"`
			UID      string         `yaml:"uid"`
			Type     string         `yaml:"type"`
			URL      string         `yaml:"url"`
			User     string         `yaml:"user"`
			JSONData map[string]any `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	yamlFile(t, &prov, "ops", "grafana", "provisioning", "datasources", "datasources.yml")
	types := map[string]string{}
	for _, ds := range prov.Datasources {
		types[ds.UID] = ds.Type
		if ds.Type == "grafana-postgresql-datasource" {
			if ds.URL != "postgres:5432" || ds.User != "postgres" || ds.JSONData["database"] != "zerolayer" {
				t.Errorf("Postgres data source %+v does not match docker-compose.yml's DATABASE_URL", ds)
			}
		}
	}
	check := func(where string, ds *grafanaDatasource) {
		if ds == nil {
			t.Errorf("%s names no data source", where)
			return
		}
		if typ, ok := types[ds.UID]; !ok || typ != ds.Type {
			t.Errorf("%s: data source %+v is not provisioned (have %v)", where, *ds, types)
		}
	}
	d := readDashboard(t)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type == "query" {
			check("variable "+v.Name, v.Datasource)
		}
	}
	for _, name := range []string{"instance", "model"} {
		if !vars[name] {
			t.Errorf("dashboard has no %s variable", name)
		}
	}
	kinds := map[string]bool{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		kinds[p.Type] = true
		check("panel "+p.Title, p.Datasource)
		for _, tg := range p.Targets {
			if tg.Datasource != nil {
				check("panel "+p.Title+" query", tg.Datasource)
			}
		}
	}
	for _, k := range []string{"heatmap", "xychart", "gauge"} {
		if !kinds[k] {
			t.Errorf("dashboard has no %s panel", k)
		}
	}
}

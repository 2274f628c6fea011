package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts/queuemetrics"
	"github.com/zerolayer/zerolayer/gpu/nvml"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// TestComposeConfigValid validates docker-compose.yml with whichever
// compose client is installed.
func TestComposeConfigValid(t *testing.T) {
	root := filepath.Join("..", "..")
	var cmd *exec.Cmd
	switch {
	case exec.Command("docker", "compose", "version").Run() == nil:
		cmd = exec.Command("docker", "compose", "config", "-q")
	default:
		p, err := exec.LookPath("docker-compose")
		if err != nil {
			t.Skip("no docker compose client installed (apt-get install docker-compose)")
		}
		cmd = exec.Command(p, "config", "-q")
	}
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compose config: %v\n%s", err, out)
	}
}

// TestNATSConfigValid checks ops/nats/nats.conf with nats-server -t.
func TestNATSConfigValid(t *testing.T) {
	p, err := exec.LookPath("nats-server")
	if err != nil {
		t.Skip("nats-server not installed")
	}
	cmd := exec.Command(p, "-c", filepath.Join("..", "..", "ops", "nats", "nats.conf"), "-t")
	cmd.Env = append(os.Environ(), "ZL_WORKER_PASSWORD=w", "ZL_BILLING_PASSWORD=b", "ZL_GATEWAY_PASSWORD=g", "ZL_OPERATOR_PASSWORD=o",
		"ZL_TENANT_ACME_PASSWORD=a", "ZL_TENANT_GLOBEX_PASSWORD=x", "ZL_SYS_PASSWORD=s")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nats-server -t: %v\n%s", err, out)
	}
}

// descNames records the metric names collectors describe.
type descNames map[string]bool

func (d descNames) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for desc := range ch {
		if m := re.FindStringSubmatch(desc.String()); m != nil {
			d[m[1]] = true
		}
	}
	return nil
}
func (d descNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		d.Register(c)
	}
}
func (d descNames) Unregister(prometheus.Collector) bool { return false }

// TestOpsMetricsExist checks that every zerolayer_* metric the Grafana
// dashboard and the alert rules query is one the worker, the scheduler,
// the NVML collector, the gateway, billing or the queue collector exports
// (a renamed metric must not leave a panel or an alert silently empty),
// and that the dashboard is valid JSON with a query (PromQL, or SQL for
// the ledger panels) in every panel.
func TestOpsMetricsExist(t *testing.T) {
	have := descNames{}
	if err := errors.Join(sched.NewMetrics().Register(have), worker.NewMetrics().Register(have)); err != nil {
		t.Fatal(err)
	}
	have.MustRegister(nvml.NewCollector(nil))
	if err := gateway.NewMetrics().Register(have); err != nil {
		t.Fatal(err)
	}
	have.MustRegister(ledger.NewCollector(nil), queuemetrics.NewCollector(nil))
	if len(have) < 20 {
		t.Fatalf("only %d metrics described: %v", len(have), have)
	}
	used := regexp.MustCompile(`zerolayer_[a-z0-9_]+`)
	check := func(file, text string) int {
		n := 0
		for _, name := range used.FindAllString(text, -1) {
			n++
			base := name
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suf); ok && have[b] {
					base = b
				}
			}
			if !have[base] {
				t.Errorf("%s queries %s, which nothing exports", file, name)
			}
		}
		return n
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "ops", "grafana", "dashboards", "zerolayer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr   string `json:"expr"`
				RawSQL string `json:"rawSql"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if dash.UID == "" || len(dash.Panels) < 10 {
		t.Fatalf("dashboard uid %q with %d panels", dash.UID, len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 || p.Targets[0].Expr == "" && p.Targets[0].RawSQL == "" {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			check("dashboard panel "+p.Title, tg.Expr)
		}
	}
	alerts, err := os.ReadFile(filepath.Join("..", "..", "ops", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if check("alerts.yml", string(alerts)) == 0 {
		t.Error("alerts.yml queries no zerolayer metric")
	}
}

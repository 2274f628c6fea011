package main

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestAlertRules runs the rule tests of every alert
// (ops/prometheus/alerts_test.yml) and checks the shipped Prometheus
// configuration with promtool, when it is installed; without it, it says
// so and checks only what it can in Go: that every alert of alerts.yml has
// a test in which it fires, and that prometheus.yml's rule files are found
// relative to it, as promtool and Prometheus look for them.
func TestAlertRules(t *testing.T) {
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				AlertName string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	yamlFile(t, &tests, "ops", "prometheus", "alerts_test.yml")
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, c := range tests.Tests {
		for _, a := range c.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	for _, r := range alertRules(t) {
		if !fires[r.Alert] {
			t.Errorf("alert %s has no rule test in which it fires (ops/prometheus/alerts_test.yml)", r.Alert)
		}
		if !quiet[r.Alert] && r.Alert != "BillingRejectingUsage" {
			t.Logf("alert %s has no rule test in which it stays quiet", r.Alert)
		}
	}
	var cfg struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	yamlFile(t, &cfg, "ops", "prometheus", "prometheus.yml")
	if len(cfg.RuleFiles) == 0 {
		t.Error("prometheus.yml loads no rule files")
	}
	for _, f := range cfg.RuleFiles {
		if filepath.IsAbs(f) {
			t.Errorf("prometheus.yml names rule file %s by an absolute path: it exists in one place only (the container); name it relative to prometheus.yml", f)
			continue
		}
		opsFile(t, "ops", "prometheus", f) // fails when it is not there
	}

	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed: the rule tests and the configuration check did not run (go install github.com/prometheus/prometheus/cmd/promtool@latest)")
	}
	dir := filepath.Join("..", "..", "ops", "prometheus")
	for _, args := range [][]string{
		{"test", "rules", "alerts_test.yml"},
		{"check", "rules", "alerts.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
	// From the repository root too, as the issue ran it.
	cmd := exec.Command(bin, "check", "config", filepath.Join("ops", "prometheus", "prometheus.yml"))
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check config ops/prometheus/prometheus.yml: %v\n%s", err, out)
	}
}

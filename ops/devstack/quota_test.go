package devstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/ops/devstack/devstacktest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
)

// TestTenantLimits runs the limits end to end: set in Postgres, published
// by billing to ZL_LIMITS, enforced by the gateway (429, Retry-After, the
// code) and by the worker for jobs published straight to NATS (an error
// event and a failed result with the code). A refused job runs nowhere and
// has no usage row, so no charge; a tenant without limits is unaffected;
// the refusal metrics of both admitters move.
func TestTenantLimits(t *testing.T) {
	t.Parallel()
	st := devstacktest.Start(t, devstack.Config{HTTPAddr: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	for _, q := range st.Quotas() {
		if err := q.Register(reg); err != nil {
			t.Fatal(err)
		}
	}
	n := func(v int64) *int64 { return &v }
	tiny := decimal.RequireFromString("0.000001") // below one job's estimate
	for _, l := range []ledger.TenantLimits{
		{Tenant: "acme", RequestsPerMinute: n(2)},
		{Tenant: "busy", MaxConcurrent: n(0)},
		{Tenant: "broke", MonthlySpend: &tiny},
	} {
		if _, err := ledger.SetTenantLimits(ctx, st.Pool(), l); err != nil {
			t.Fatal(err)
		}
	}
	// Billing publishes at once (NOTIFY); both admitters follow ZL_LIMITS.
	waitFor(t, "both admitters have the limits", func() (bool, error) {
		c, err := testutil.GatherAndCount(reg, "zerolayer_quota_limit")
		return c == 2*3, err
	})

	model := st.Models().Names()[0]
	job := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":4}`, model)
	post := func(tenant string) (int, http.Header, map[string]any) {
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+st.GatewayAddr()+"/v1/jobs", strings.NewReader(job))
		req.Header.Set(gateway.TenantHeader, tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, resp.Header, body
	}
	refusedHTTP := func(tenant string, code contracts.Code) {
		t.Helper()
		status, h, body := post(tenant)
		e, _ := body["error"].(map[string]any)
		after, _ := strconv.Atoi(h.Get("Retry-After"))
		if status != http.StatusTooManyRequests || e == nil || e["code"] != string(code) || after < 1 || e["retry_after_ms"] == nil {
			t.Fatalf("%s through the gateway: %d, Retry-After %q, %v; want 429 %s with a retry-after", tenant, status, h.Get("Retry-After"), body, code)
		}
	}
	var ran []string // job ids, acme's then globex's
	for range 2 {
		status, _, body := post("acme")
		if status != http.StatusAccepted {
			t.Fatalf("acme's job within its rate: %d %v", status, body)
		}
		ran = append(ran, body["id"].(string))
	}
	refusedHTTP("acme", contracts.CodeRateLimited)
	refusedHTTP("busy", contracts.CodeConcurrencyLimited)
	refusedHTTP("broke", contracts.CodeSpendLimitExceeded)
	// The worker counts acme's two jobs too (by the time JetStream stored
	// them) once it has taken them.
	waitFor(t, "the worker admitted acme's jobs", func() (bool, error) {
		mfs, err := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "zerolayer_quota_admitted_total" {
				for _, m := range mf.GetMetric() {
					if labelsOf(m.GetLabel())["domain"] == "worker" && m.GetCounter().GetValue() == 2 {
						return true, err
					}
				}
			}
		}
		return false, err
	})

	// Straight to NATS (a Go client without an admitter): the worker
	// refuses, with the code in the error event and the failed result.
	var refused []string
	clients := map[string]*producer.Client{}
	for tenant, code := range map[string]contracts.Code{"acme": contracts.CodeRateLimited, "busy": contracts.CodeConcurrencyLimited, "broke": contracts.CodeSpendLimitExceeded} {
		c, err := producer.New(st.Conn(), producer.Config{Tenant: tenant, Models: st.Models().Paths()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[tenant] = c
		id, err := c.Submit(ctx, &contracts.JobRequest{Model: model, MaxTokens: 4, Messages: []contracts.Message{{Role: "user", Content: "Once upon a time"}}}, nil)
		if err != nil {
			t.Fatalf("%s publishes straight to NATS: %v", tenant, err)
		}
		res, err := c.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != contracts.StatusFailed || res.Error == nil || res.Error.Code != code || res.Usage != nil {
			t.Fatalf("%s through NATS: result %+v %+v, want failed with %s", tenant, res, res.Error, code)
		}
		evs, wait, err := c.Events(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var last contracts.Event
		for ev := range evs {
			last = ev
		}
		if err := wait(); err != nil || last.Type != contracts.EventError || last.Error.Code != code {
			t.Fatalf("%s through NATS: last event %+v, %v; want an error event with %s", tenant, last, err, code)
		}
		refused = append(refused, id)
	}

	// Another tenant is unaffected; acme's admitted jobs ran.
	other, err := producer.New(st.Conn(), producer.Config{Tenant: "globex", Models: st.Models().Paths()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for range 3 {
		status, _, body := post("globex")
		if status != http.StatusAccepted {
			t.Fatalf("globex through the gateway: %d %v", status, body)
		}
		ran = append(ran, body["id"].(string))
	}
	for i, id := range ran {
		c := other
		if i < 2 {
			c = clients["acme"]
		}
		res, err := c.Wait(ctx, id)
		if err != nil || res.Status != contracts.StatusCompleted {
			t.Fatalf("job %s: %+v, %v", id, res, err)
		}
	}
	waitFor(t, "the jobs that ran are charged", func() (bool, error) {
		var c int
		err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM charges WHERE job_id = ANY($1)", ran).Scan(&c)
		return c == len(ran), err
	})
	var usage int
	if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM usage WHERE job_id = ANY($1) OR tenant_id IN ('busy', 'broke')", refused).Scan(&usage); err != nil || usage != 0 {
		t.Errorf("refused jobs have %d usage rows (%v), want none", usage, err)
	}

	// Both admitters counted their refusals.
	for _, domain := range []string{"gateway", "worker"} {
		for _, code := range []contracts.Code{contracts.CodeRateLimited, contracts.CodeConcurrencyLimited, contracts.CodeSpendLimitExceeded} {
			if v := refusals(t, reg, domain, string(code)); v != 1 {
				t.Errorf("zerolayer_quota_refusals_total{domain=%q,code=%q} = %v, want 1", domain, code, v)
			}
		}
	}
}

// refusals sums zerolayer_quota_refusals_total of one admitter and code.
func refusals(t *testing.T, reg *prometheus.Registry, domain, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "zerolayer_quota_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labels := labelsOf(m.GetLabel()); labels["domain"] == domain && labels["code"] == code {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func labelsOf(lps []*dto.LabelPair) map[string]string {
	out := map[string]string{}
	for _, lp := range lps {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

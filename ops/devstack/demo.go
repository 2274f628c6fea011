package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/zerolayer/zerolayer/billing/finance"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
)

// demoTenants are the demo's tenants: acme's bulk document run, globex's
// interactive traffic.
var demoTenants = []string{"acme", "globex"}

// demoJob is one job of the demo batch.
type demoJob struct {
	tenant    string
	prio      contracts.Priority
	system    string
	prompt    string
	maxTokens int
	stream    bool
}

// demoJobs is a small mixed batch: a bulk document run of one tenant at low
// and normal priority sharing its instructions, and another tenant's
// interactive traffic at high and normal priority.
func demoJobs() []demoJob {
	openings := []string{"Once upon a time", "The little dog", "Tom and Sue", "One day, a big bear", "Lily had a red ball",
		"The sun was hot", "A small bird", "Mom and Dad", "The old tree", "Ben wanted a cake"}
	var jobs []demoJob
	for i, o := range openings {
		p := contracts.PriorityLow
		if i%3 == 0 {
			p = contracts.PriorityNormal
		}
		jobs = append(jobs, demoJob{tenant: "acme", prio: p, system: "A short story for children.", prompt: o, maxTokens: 48 + 8*i})
	}
	long := "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. " +
		"One day, she saw a big red ball under a tree. She ran to get it, but a small dog got there first."
	jobs = append(jobs,
		demoJob{tenant: "globex", prio: contracts.PriorityHigh, prompt: "Once upon a time, in a small town", maxTokens: 160, stream: true},
		demoJob{tenant: "globex", prio: contracts.PriorityHigh, prompt: "The cat and the dog", maxTokens: 40},
		demoJob{tenant: "globex", prio: contracts.PriorityNormal, prompt: long, maxTokens: 220},
		demoJob{tenant: "globex", prio: contracts.PriorityNormal, prompt: "Sam found a box", maxTokens: 64},
	)
	return jobs
}

// demo is one run of the demo scenario.
type demo struct {
	st      *Stack
	w       io.Writer
	model   string
	clients map[string]*producer.Client
	// batchID is the batch_id of acme's jobs.
	batchID string
	subs    []submittedJob
	// perTenant counts the submitted jobs by tenant.
	perTenant map[string]int64
}

// submittedJob is a demo job and its id.
type submittedJob struct {
	job demoJob
	id  string
}

// RunDemo runs the demo scenario on a started stack and writes what
// happens to w: it submits a mixed batch from two tenants (acme's bulk
// document run at low and normal priority, one batch; globex's
// interactive jobs at high and normal priority), streams globex's first
// job, asks one question through the OpenAI-compatible HTTP gateway (the
// stack's, else one of its own for the while), waits for every result
// and for billing to rate them, and prints each tenant's report and
// acme's batch report. It is what `zerolayer dev --demo` runs.
func RunDemo(ctx context.Context, st *Stack, w io.Writer) error {
	start := time.Now()
	from := start.Add(-time.Second) // report period: created_at is JetStream's clock
	d := &demo{st: st, w: w, model: st.Models().Names()[0], clients: map[string]*producer.Client{}, perTenant: map[string]int64{},
		batchID: "demo-" + time.Now().UTC().Format("20060102-150405")}
	for _, t := range demoTenants {
		c, err := producer.New(st.Conn(), producer.Config{Tenant: t, Models: st.Models().Paths()})
		if err != nil {
			return err
		}
		defer c.Close()
		d.clients[t] = c
	}
	if err := d.submit(ctx); err != nil {
		return err
	}
	if err := d.stream(ctx); err != nil {
		return err
	}
	if err := d.askHTTP(ctx); err != nil {
		return err
	}
	if err := d.wait(ctx, start); err != nil {
		return err
	}
	return d.reports(ctx, from)
}

// submit submits the demo batch.
func (d *demo) submit(ctx context.Context) error {
	for i, j := range demoJobs() {
		req := &contracts.JobRequest{Model: d.model, System: j.system, Messages: []contracts.Message{{Role: "user", Content: j.prompt}},
			MaxTokens: j.maxTokens, Priority: j.prio, Stream: j.stream, Metadata: map[string]string{"custom_id": fmt.Sprintf("doc-%02d", i)}}
		if j.tenant == "acme" {
			req.Metadata["batch_id"] = d.batchID
		}
		id, err := d.clients[j.tenant].Submit(ctx, req, nil)
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		d.subs = append(d.subs, submittedJob{j, id})
		d.perTenant[j.tenant]++
	}
	fmt.Fprintf(d.w, "submitted %d jobs: %d from acme (bulk, low/normal), %d from globex (high/normal)\n\n", len(d.subs), d.perTenant["acme"], d.perTenant["globex"])
	return nil
}

// stream prints the streamed jobs' events as they come.
func (d *demo) stream(ctx context.Context) error {
	for _, s := range d.subs {
		if !s.job.stream {
			continue
		}
		fmt.Fprintf(d.w, "── streaming job %s (%s, %s priority) ──\n%s", s.id, s.job.tenant, s.job.prio, s.job.prompt)
		events, done, err := d.clients[s.job.tenant].Events(ctx, s.id)
		if err != nil {
			return err
		}
		for ev := range events {
			switch ev.Type {
			case contracts.EventDelta:
				fmt.Fprint(d.w, ev.Text)
			case contracts.EventFinal:
				u := ev.Usage
				fmt.Fprintf(d.w, "\n[%s: %d prompt + %d output tokens, queue %.1f ms, first token %.1f ms, %.2f ms/token]\n\n",
					ev.StopReason, u.InputTokens, u.OutputTokens, u.QueueMs, u.TimeToFirstTokenMs, u.TimePerTokenMs)
			case contracts.EventError:
				fmt.Fprintf(d.w, "\n[error %s: %s]\n\n", ev.Error.Code, ev.Error.Message)
			}
		}
		if err := done(); err != nil {
			return err
		}
	}
	return nil
}

// askHTTP asks one question through the HTTP gateway's OpenAI-compatible
// endpoint, as an application would: the stack's gateway, else one of
// its own on a free port for the while.
func (d *demo) askHTTP(ctx context.Context) error {
	addr := d.st.GatewayAddr()
	if addr == "" {
		g, err := d.st.serveGateway("127.0.0.1:0", nil)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			g.Stop(sctx)
		}()
		addr = g.Addr()
	}
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"The little dog"}],"max_tokens":40}`, d.model)
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(gateway.TenantHeader, "globex")
	req.Header.Set(gateway.PriorityHeader, "high")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var cc struct {
		Choices []struct {
			Message struct{ Content string }
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil || resp.StatusCode != http.StatusOK || len(cc.Choices) != 1 {
		return fmt.Errorf("HTTP gateway: status %d, %v", resp.StatusCode, err)
	}
	fmt.Fprintf(d.w, "── POST /v1/chat/completions (OpenAI-compatible, tenant globex, job %s) ──\nThe little dog%s\n[%d prompt + %d completion tokens]\n\n",
		resp.Header.Get(gateway.JobIDHeader), cc.Choices[0].Message.Content, cc.Usage.PromptTokens, cc.Usage.CompletionTokens)
	return nil
}

// wait waits for every job's result and counts them by status.
func (d *demo) wait(ctx context.Context, start time.Time) error {
	counts := map[contracts.ResultStatus]int{}
	tokens := 0
	for _, s := range d.subs {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		res, err := d.clients[s.job.tenant].Wait(wctx, s.id)
		cancel()
		if err != nil {
			return fmt.Errorf("wait for %s: %w", s.id, err)
		}
		counts[res.Status]++
		if res.Usage != nil {
			tokens += res.Usage.OutputTokens
		}
	}
	fmt.Fprintf(d.w, "all %d jobs finished in %.1f s: %d completed, %d failed, %d canceled; %d output tokens\n\n",
		len(d.subs), time.Since(start).Seconds(), counts[contracts.StatusCompleted], counts[contracts.StatusFailed], counts[contracts.StatusCanceled], tokens)
	return nil
}

// reports prints each tenant's billing report once billing rated its jobs,
// then acme's batch, line by line.
func (d *demo) reports(ctx context.Context, from time.Time) error {
	for _, t := range demoTenants {
		rep, err := d.waitRated(ctx, t, from)
		if err != nil {
			return err
		}
		fmt.Fprintf(d.w, "── billing report: %s ──\n", t)
		if err := rep.WriteTable(d.w); err != nil {
			return err
		}
		fmt.Fprintln(d.w)
	}
	br, err := finance.BuildBatchReport(ctx, d.st.Pool(), "acme", d.batchID)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.w, "── batch report: acme %s (zerolayer report --tenant acme --batch %s) ──\n", d.batchID, d.batchID)
	return br.Write(d.w, finance.FormatTable)
}

// waitRated polls the tenant's report until its jobs are rated. Until
// billing has ingested the tenant's first usage the tenant is unknown to
// it (ledger.ErrUnknownTenant): the jobs can finish before that.
func (d *demo) waitRated(ctx context.Context, tenant string, from time.Time) (*finance.Report, error) {
	n := d.perTenant[tenant]
	deadline := time.Now().Add(time.Minute)
	for {
		rep, err := finance.BuildReport(ctx, d.st.Pool(), tenant, from, time.Now().Add(time.Minute))
		switch {
		case errors.Is(err, ledger.ErrUnknownTenant):
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("billing recorded no usage of %s within a minute: %w", tenant, err)
			}
		case err != nil:
			return nil, err
		case rep.Total.Jobs >= n && rep.Unrated == 0:
			return rep, nil
		case time.Now().After(deadline):
			return nil, fmt.Errorf("billing rated %d of %d jobs of %s within a minute", rep.Total.Jobs, n, tenant)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

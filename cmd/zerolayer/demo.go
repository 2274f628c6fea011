package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/zerolayer/zerolayer/billing"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
)

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

// runDemo submits the demo batch, streams one job, waits for every result
// and for billing to rate them, and prints each tenant's report.
func runDemo(ctx context.Context, st *devstack.Stack, out io.Writer) error {
	start := time.Now()
	from := start.Add(-time.Second) // report period: created_at is JetStream's clock
	model := st.Models().Names()[0]
	clients := map[string]*producer.Client{}
	for _, t := range []string{"acme", "globex"} {
		c, err := producer.New(st.Conn(), producer.Config{Tenant: t, Models: st.Models().Paths()})
		if err != nil {
			return err
		}
		defer c.Close()
		clients[t] = c
	}
	type submitted struct {
		job demoJob
		id  string
	}
	var subs []submitted
	perTenant := map[string]int64{}
	batchID := "demo-" + time.Now().UTC().Format("20060102-150405")
	for i, j := range demoJobs() {
		req := &contracts.JobRequest{Model: model, System: j.system, Messages: []contracts.Message{{Role: "user", Content: j.prompt}},
			MaxTokens: j.maxTokens, Priority: j.prio, Stream: j.stream, Metadata: map[string]string{"custom_id": fmt.Sprintf("doc-%02d", i)}}
		if j.tenant == "acme" {
			req.Metadata["batch_id"] = batchID
		}
		id, err := clients[j.tenant].Submit(ctx, req, nil)
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		subs = append(subs, submitted{j, id})
		perTenant[j.tenant]++
	}
	fmt.Fprintf(out, "submitted %d jobs: %d from acme (bulk, low/normal), %d from globex (high/normal)\n\n", len(subs), perTenant["acme"], perTenant["globex"])
	for _, s := range subs {
		if !s.job.stream {
			continue
		}
		fmt.Fprintf(out, "── streaming job %s (%s, %s priority) ──\n%s", s.id, s.job.tenant, s.job.prio, s.job.prompt)
		events, done, err := clients[s.job.tenant].Events(ctx, s.id)
		if err != nil {
			return err
		}
		for ev := range events {
			switch ev.Type {
			case contracts.EventDelta:
				fmt.Fprint(out, ev.Text)
			case contracts.EventFinal:
				u := ev.Usage
				fmt.Fprintf(out, "\n[%s: %d prompt + %d output tokens, queue %.1f ms, first token %.1f ms, %.2f ms/token]\n\n",
					ev.StopReason, u.InputTokens, u.OutputTokens, u.QueueMs, u.TimeToFirstTokenMs, u.TimePerTokenMs)
			case contracts.EventError:
				fmt.Fprintf(out, "\n[error %s: %s]\n\n", ev.Error.Code, ev.Error.Message)
			}
		}
		if err := done(); err != nil {
			return err
		}
	}
	if err := demoHTTP(ctx, st, model, out); err != nil {
		return err
	}
	counts := map[contracts.ResultStatus]int{}
	tokens := 0
	for _, s := range subs {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		res, err := clients[s.job.tenant].Wait(wctx, s.id)
		cancel()
		if err != nil {
			return fmt.Errorf("wait for %s: %w", s.id, err)
		}
		counts[res.Status]++
		if res.Usage != nil {
			tokens += res.Usage.OutputTokens
		}
	}
	fmt.Fprintf(out, "all %d jobs finished in %.1f s: %d completed, %d failed, %d canceled; %d output tokens\n\n",
		len(subs), time.Since(start).Seconds(), counts[contracts.StatusCompleted], counts[contracts.StatusFailed], counts[contracts.StatusCanceled], tokens)
	for _, t := range []string{"acme", "globex"} {
		rep, err := waitRated(ctx, st, t, from, perTenant[t])
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "── billing report: %s ──\n", t)
		if err := rep.WriteTable(out); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	// acme's jobs were one batch: its cost, line by line.
	br, err := billing.BuildBatchReport(ctx, st.Pool(), "acme", batchID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "── batch report: acme %s (zerolayer report --tenant acme --batch %s) ──\n", batchID, batchID)
	return br.Write(out, billing.FormatTable)
}

// waitRated polls the tenant's report until n jobs are rated.
func waitRated(ctx context.Context, st *devstack.Stack, tenant string, from time.Time, n int64) (*billing.Report, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		rep, err := billing.BuildReport(ctx, st.Pool(), tenant, from, time.Now().Add(time.Minute))
		if err != nil {
			return nil, err
		}
		if rep.Total.Jobs >= n && rep.Unrated == 0 {
			return rep, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("billing rated %d of %d jobs of %s within a minute", rep.Total.Jobs, n, tenant)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// demoHTTP asks one question through the HTTP gateway's OpenAI-compatible
// endpoint, as an application would.
func demoHTTP(ctx context.Context, st *devstack.Stack, model string, out io.Writer) error {
	stop, addr, err := serveGateway(st.Conn(), "127.0.0.1:0", gateway.Config{TenantHeader: true, Models: st.Models().Paths()})
	if err != nil {
		return err
	}
	defer stop(5 * time.Second)
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"The little dog"}],"max_tokens":40}`, model)
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
	fmt.Fprintf(out, "── POST /v1/chat/completions (OpenAI-compatible, tenant globex, job %s) ──\nThe little dog%s\n[%d prompt + %d completion tokens]\n\n",
		resp.Header.Get(gateway.JobIDHeader), cc.Choices[0].Message.Content, cc.Usage.PromptTokens, cc.Usage.CompletionTokens)
	return nil
}

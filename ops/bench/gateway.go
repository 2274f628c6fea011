package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
)

// GatewayConfig configures Gateway.
type GatewayConfig struct {
	// Requests is the number of chat completions per client. Required.
	Requests int
	// Concurrency is how many requests are open at once. Defaults to 64.
	Concurrency int
	// Tokens is each completion's max_tokens. Defaults to 32.
	Tokens int
	// Sequential is the number of one-token completions then sent one at
	// a time through each client, on an otherwise idle stack: their
	// latency is the pipeline's own (queue, gateway), not a backlog's.
	// Defaults to min(Requests, 1000); -1 skips them.
	Sequential int
}

// GatewayResults are the measurements of Gateway: the Go producer's
// baseline and the HTTP gateway.
type GatewayResults struct {
	Producer, HTTP Rate
	// SequentialProducer and SequentialHTTP are the one-at-a-time calls.
	SequentialProducer, SequentialHTTP Rate
}

// Rate is the throughput and latency of one client.
type Rate struct {
	Label     string
	PerSecond float64
	// P50, P99 and Max are latency percentiles in milliseconds.
	P50, P99, Max float64
}

// Gateway sends cfg.Requests chat completions (half of them streamed)
// through the HTTP gateway of st, which must have one
// (devstack.Config.HTTPAddr), and, as the baseline in the same process,
// the same jobs through the Go producer (submit and wait), both as tenant
// Tenant, and writes requests per second and latencies to w.
func Gateway(ctx context.Context, st *devstack.Stack, cfg GatewayConfig, w io.Writer) (*GatewayResults, error) {
	if cfg.Requests <= 0 {
		return nil, fmt.Errorf("bench: %d gateway requests: want 1 or more", cfg.Requests)
	}
	addr, err := gatewayAddr(st)
	if err != nil {
		return nil, err
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 64)
	cfg.Tokens = cmp.Or(cfg.Tokens, 32)
	cfg.Sequential = cmp.Or(cfg.Sequential, min(cfg.Requests, 1000))
	c, err := producer.New(st.Conn(), producer.Config{Tenant: Tenant, Models: st.Models().Paths()})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	name := st.Models().Names()[0]
	prompt := func(i int) string { return fmt.Sprintf("Once upon a time %d", i) }
	fmt.Fprintf(w, "%d requests of %d tokens, %d at a time, model %s\n", cfg.Requests, cfg.Tokens, cfg.Concurrency, name)
	viaProducer := func(tokens int) func(i int) error {
		return func(i int) error {
			id, err := c.Submit(ctx, &contracts.JobRequest{Model: name, MaxTokens: tokens, Messages: []contracts.Message{{Role: "user", Content: prompt(i)}}}, nil)
			if err != nil {
				return err
			}
			res, err := c.Wait(ctx, id)
			if err == nil && res.Status != contracts.StatusCompleted {
				err = fmt.Errorf("job %s %s", id, res.Status)
			}
			return err
		}
	}
	viaHTTP := func(tokens int) func(i int) error {
		return func(i int) error {
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":%v}`, name, prompt(i), tokens, i%2 == 0)
			return postChat(ctx, addr, body)
		}
	}
	res := &GatewayResults{}
	if res.Producer, err = measureRate(cfg.Requests, cfg.Concurrency, "Go producer (submit + wait)", w, viaProducer(cfg.Tokens)); err != nil {
		return nil, err
	}
	if res.HTTP, err = measureRate(cfg.Requests, cfg.Concurrency, "HTTP /v1/chat/completions (½ SSE)", w, viaHTTP(cfg.Tokens)); err != nil {
		return nil, err
	}
	if cfg.Sequential <= 0 {
		return res, nil
	}
	fmt.Fprintf(w, "%d one-token requests one at a time, nothing else running\n", cfg.Sequential)
	if res.SequentialProducer, err = measureRate(cfg.Sequential, 1, "Go producer (submit + wait)", w, viaProducer(1)); err != nil {
		return nil, err
	}
	if res.SequentialHTTP, err = measureRate(cfg.Sequential, 1, "HTTP /v1/chat/completions (½ SSE)", w, viaHTTP(1)); err != nil {
		return nil, err
	}
	return res, nil
}

// postChat posts one chat completion as tenant Tenant and reads the whole
// answer.
func postChat(ctx context.Context, addr, body string) error {
	resp, err := openChat(ctx, http.DefaultClient, addr, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// openChat posts one chat completion as tenant Tenant and returns the
// response of status 200, whose body the caller reads and closes.
func openChat(ctx context.Context, client *http.Client, addr, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set(gateway.TenantHeader, Tenant)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	return resp, nil
}

// measureRate runs one(i) for n requests, concurrency at a time, and
// writes the rate and latencies to w under label.
func measureRate(n, concurrency int, label string, w io.Writer, one func(i int) error) (Rate, error) {
	lat, took, err := runClients(n, concurrency, one)
	if err != nil {
		return Rate{}, fmt.Errorf("%s: %w", label, err)
	}
	sort.Float64s(lat)
	r := Rate{Label: label, PerSecond: float64(n) / took.Seconds(), P50: percentile(lat, 0.5), P99: percentile(lat, 0.99), Max: lat[n-1]}
	fmt.Fprintf(w, "%-34s %6.1f requests/s   latency p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms\n", label, r.PerSecond, r.P50, r.P99, r.Max)
	return r, nil
}

// gatewayAddr is the address of st's HTTP gateway, or an error saying how
// to start one.
func gatewayAddr(st *devstack.Stack) (string, error) {
	if addr := st.GatewayAddr(); addr != "" {
		return addr, nil
	}
	return "", errors.New("bench: the stack serves no HTTP gateway: start it with Config.HTTPAddr (\"127.0.0.1:0\")")
}

// runClients calls one(0) … one(n-1) from concurrency clients, each
// starting its next call as its last returns, and returns each call's
// latency in milliseconds (in call order), the wall time of all of them,
// and the first error.
func runClients(n, concurrency int, one func(i int) error) (lat []float64, took time.Duration, err error) {
	lat = make([]float64, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := time.Now()
			if err := one(i); err != nil {
				errs <- err
			}
			lat[i] = millis(time.Since(s))
		}()
	}
	wg.Wait()
	took = time.Since(t0)
	close(errs)
	return lat, took, <-errs
}

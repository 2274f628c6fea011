package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker"
)

// benchGateway sends n chat completions (32 tokens, 64 at a time, half of
// them streamed) through the HTTP gateway of a dev stack, and, as the
// baseline in the same process, the same jobs through the Go producer
// (submit and wait), and reports requests per second and latencies.
func benchGateway(ctx context.Context, n int, mc worker.ModelsConfig, sf *schedFlags, out io.Writer) error {
	st, c, done, err := benchStack(ctx, "gateway", mc, sf)
	if err != nil {
		return err
	}
	defer done()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	stop, addr, err := serveGateway(st.Conn(), "127.0.0.1:0", gateway.Config{TenantHeader: true, Models: st.Models().Paths(), Logger: log})
	if err != nil {
		return err
	}
	defer stop(5 * time.Second)
	name := st.Models().Names()[0]
	const concurrency, tokens = 64, 32
	run := func(label string, one func(i int) error) error {
		lat := make([]float64, n)
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
				lat[i] = float64(time.Since(s).Microseconds()) / 1000
			}()
		}
		wg.Wait()
		took := time.Since(t0)
		close(errs)
		if err := <-errs; err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		sort.Float64s(lat)
		fmt.Fprintf(out, "%-34s %6.1f requests/s   latency p50 %6.0f ms  p99 %6.0f ms\n", label, float64(n)/took.Seconds(), lat[n/2], lat[n*99/100])
		return nil
	}
	prompt := func(i int) string { return fmt.Sprintf("Once upon a time %d", i) }
	fmt.Fprintf(out, "%d requests of %d tokens, %d at a time, model %s\n", n, tokens, concurrency, name)
	if err := run("Go producer (submit + wait)", func(i int) error {
		id, err := c.Submit(ctx, &contracts.JobRequest{Model: name, MaxTokens: tokens, Messages: []contracts.Message{{Role: "user", Content: prompt(i)}}}, nil)
		if err != nil {
			return err
		}
		res, err := c.Wait(ctx, id)
		if err == nil && res.Status != contracts.StatusCompleted {
			err = fmt.Errorf("job %s %s", id, res.Status)
		}
		return err
	}); err != nil {
		return err
	}
	return run("HTTP /v1/chat/completions (½ SSE)", func(i int) error {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":%v}`, name, prompt(i), tokens, i%2 == 0)
		req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set(gateway.TenantHeader, "bench")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker/model/store"
)

// connectProducer connects command cmd to NATS and returns a producer for
// tenant; closeAll closes both.
func connectProducer(nf *natsFlag, cmd, tenant string, models map[string]string) (_ *producer.Client, closeAll func(), _ error) {
	nc, err := nf.connect(cmd)
	if err != nil {
		return nil, nil, err
	}
	c, err := producer.New(nc, producer.Config{Tenant: tenant, Models: models})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, func() { c.Close(); nc.Close() }, nil
}

func runSubmit(ctx context.Context, args []string) error {
	fs := newFlags("submit")
	nf := addNATSFlag(fs)
	tenant := fs.String("tenant", os.Getenv("ZEROLAYER_TENANT"), "tenant to submit as (env ZEROLAYER_TENANT)")
	modelName := fs.String("model", "", "model name")
	prompt := fs.String("prompt", "", "user message")
	system := fs.String("system", "", "system prompt")
	file := fs.String("request", "", "a JSON job request file ('-' for stdin) instead of --prompt")
	prio := fs.String("priority", "", "high, normal or low")
	maxTokens := fs.Int("max-tokens", 0, "max tokens (default: the contract default)")
	id := fs.String("id", "", "job id (idempotency key; default: random)")
	async := fs.Bool("async", false, "print the job id and return without waiting")
	format := fs.String("format", "text", "text (stream the output) or json (events, then the result)")
	waitModel := fs.Bool("wait-for-model", false, "queue the job even when no live worker serves its model, until one starts (without it, such a job is refused with unknown_model while other workers are live)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var req contracts.JobRequest
	switch {
	case *file != "":
		var data []byte
		var err error
		if *file == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(*file)
		}
		if err != nil {
			return err
		}
		r, err := contracts.DecodeJobRequest(data, contracts.Limits{})
		if err != nil {
			return err
		}
		req = *r
	case *prompt != "":
		req = contracts.JobRequest{Model: *modelName, System: *system, Messages: []contracts.Message{{Role: "user", Content: *prompt}}}
	default:
		return usagef("give --prompt or --request")
	}
	if *modelName != "" {
		req.Model = *modelName
	}
	if *prio != "" {
		p, err := contracts.ParsePriority(*prio)
		if err != nil {
			return usagef("--priority: %v", err)
		}
		req.Priority = p
	}
	if *maxTokens != 0 {
		req.MaxTokens = *maxTokens
	}
	if *id != "" {
		req.ID = *id
	}
	req.Stream = !*async
	req.WaitForModel = req.WaitForModel || *waitModel
	models := map[string]string{}
	if p, err := store.Resolve(req.Model, modelDirs()); err == nil {
		models[req.Model] = p
	}
	c, closeAll, err := connectProducer(nf, "submit", *tenant, models)
	if err != nil {
		return err
	}
	defer closeAll()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	jobID, err := c.Submit(sctx, &req, nil)
	if err != nil {
		return err
	}
	if *async {
		fmt.Fprintln(stdout, jobID)
		return nil
	}
	fmt.Fprintf(os.Stderr, "job %s submitted\n", jobID)
	events, done, err := c.Events(ctx, jobID)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	for ev := range events {
		switch {
		case *format == "json":
			enc.Encode(ev)
		case ev.Type == contracts.EventDelta:
			fmt.Fprint(stdout, ev.Text)
		case ev.Type == contracts.EventError:
			fmt.Fprintln(stdout)
			return fmt.Errorf("job %s failed: %s: %s", jobID, ev.Error.Code, ev.Error.Message)
		case ev.Type == contracts.EventFinal:
			fmt.Fprintln(stdout)
			if u := ev.Usage; u != nil {
				fmt.Fprintf(os.Stderr, "[%s] %d prompt + %d output tokens, queue %.1f ms, first token %.1f ms, %.2f ms/token\n",
					ev.StopReason, u.InputTokens, u.OutputTokens, u.QueueMs, u.TimeToFirstTokenMs, u.TimePerTokenMs)
			}
		}
	}
	if err := done(); err != nil {
		return err
	}
	if *format == "json" {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := c.Wait(wctx, jobID)
		if err != nil {
			return err
		}
		return enc.Encode(res)
	}
	return ctx.Err()
}

package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestThinkingJob runs the hand-set thinking model (workertest.ThinkerPath:
// a real forward pass whose greedy output is a <think> block, then an
// answer) through NATS: with thinking on (the template's default, and
// asked for) the result and the final event carry the reasoning apart from
// the answer, and the streamed deltas split the same way; with thinking
// off the prompt ends in the template's empty block; thinking asked of a
// model without a switch, or with a response_format, is refused.
func TestThinkingJob(t *testing.T) {
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewThinkerExecutor(t, workertest.ThinkerPath(t)), "w1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(req *contracts.JobRequest) (*contracts.Result, string, string) {
		t.Helper()
		req.Stream = true
		id, err := b.Client.Submit(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		evs, errf, err := b.Client.Events(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var text, reasoning strings.Builder
		for ev := range evs {
			if ev.Type == contracts.EventDelta {
				text.WriteString(ev.Text)
				reasoning.WriteString(ev.Reasoning)
			}
		}
		if err := errf(); err != nil {
			t.Fatal(err)
		}
		res, err := b.Client.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return res, text.String(), reasoning.String()
	}
	ask := func(th *contracts.Thinking, model string) *contracts.JobRequest {
		return &contracts.JobRequest{Model: model, MaxTokens: 16, Thinking: th,
			Messages: []contracts.Message{{Role: contracts.RoleUser, Content: "Is 221 a prime number?"}}}
	}
	for _, th := range []*contracts.Thinking{nil, {Type: contracts.ThinkingEnabled}} {
		res, text, reasoning := run(ask(th, workertest.ThinkerName))
		if res.Status != contracts.StatusCompleted || res.Reasoning != workertest.ThinkerReasoning || res.Text != workertest.ThinkerAnswer ||
			res.StopReason != contracts.StopEndTurn || len(res.TokenIDs) != 5 {
			t.Errorf("thinking %+v: result %+v", th, res)
		}
		if text != workertest.ThinkerAnswer || strings.TrimSpace(reasoning) != workertest.ThinkerReasoning {
			t.Errorf("thinking %+v: streamed text %q, reasoning %q", th, text, reasoning)
		}
	}
	// Off: the prompt ends in the template's empty block, whose last
	// piece ("\n\n") the model's chain continues with the answer: no
	// reasoning, one token.
	res, _, _ := run(ask(&contracts.Thinking{Type: contracts.ThinkingDisabled}, workertest.ThinkerName))
	if res.Status != contracts.StatusCompleted || res.Reasoning != "" || res.Text != workertest.ThinkerAnswer || len(res.TokenIDs) != 1 {
		t.Errorf("thinking disabled: %+v", res)
	}
	on, _, _ := run(ask(nil, workertest.ThinkerName))
	if res.Usage.InputTokens <= on.Usage.InputTokens {
		t.Errorf("the prompt with thinking off (%d tokens) is not longer than with it on (%d): no empty block", res.Usage.InputTokens, on.Usage.InputTokens)
	}
	// Refused: thinking with a response_format; thinking of a model
	// without a switch.
	withFormat := ask(&contracts.Thinking{Type: contracts.ThinkingEnabled}, workertest.ThinkerName)
	withFormat.ResponseFormat = &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: "No"}
	noSwitch := ask(&contracts.Thinking{Type: contracts.ThinkingEnabled}, workertest.ModelName)
	for _, req := range []*contracts.JobRequest{withFormat, noSwitch} {
		res, _, _ := run(req)
		if res.Status != contracts.StatusFailed || res.Error == nil || res.Error.Code != contracts.CodeInvalidRequest || res.Error.Field != "thinking.type" {
			t.Errorf("%s with %+v: %+v", req.Model, req.ResponseFormat, res)
		}
	}
	// A response_format alone turns the thinking off: the constraint gets
	// the whole output.
	plain := ask(nil, workertest.ThinkerName)
	plain.ResponseFormat = &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: "<think>.*"}
	if res, _, _ := run(plain); res.Status != contracts.StatusCompleted || res.Reasoning != "" {
		t.Errorf("response_format without thinking: %+v", res)
	}
}

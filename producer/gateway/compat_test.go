package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestSDKStopSequence: the matched stop sequence comes back in
// stop_sequence, plain and streamed.
func TestSDKStopSequence(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	ac := f.anthropicClient("key-acme")
	params := anthropic.MessageNewParams{Model: "stories260k", MaxTokens: 40,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Once upon a time"))}}
	greedy := aoption.WithJSONSet("temperature", 0) // (this SDK has no field for it)
	free, err := ac.Messages.New(ctx, params, greedy)
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(free.Content[0].Text)
	if len(words) < 6 {
		t.Fatalf("too short to pick a stop sequence from: %q", free.Content[0].Text)
	}
	stop := " " + words[4]
	params.StopSequences = []string{"never appears 123", stop}
	var resp *http.Response
	msg, err := ac.Messages.New(ctx, params, greedy, aoption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonStopSequence || msg.StopSequence != stop || strings.Contains(msg.Content[0].Text, stop) {
		t.Fatalf("stop %q: reason %q, stop_sequence %q, text %q", stop, msg.StopReason, msg.StopSequence, msg.Content[0].Text)
	}
	if id := resp.Header.Get(gateway.JobIDHeader); id == "" || resp.Header.Get("request-id") != id || resp.Header.Get("x-request-id") != id || msg.ID != id {
		t.Errorf("job %q, request-id %q, x-request-id %q, message id %q", id, resp.Header.Get("request-id"), resp.Header.Get("x-request-id"), msg.ID)
	}

	stream := ac.Messages.NewStreaming(ctx, params, greedy)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != anthropic.StopReasonStopSequence || acc.StopSequence != stop || acc.Content[0].Text != msg.Content[0].Text {
		t.Fatalf("streamed: reason %q, stop_sequence %q, text %q (plain %q)", acc.StopReason, acc.StopSequence, acc.Content[0].Text, msg.Content[0].Text)
	}
}

// TestSDKErrors: errors reach the SDKs with their status, type and
// message; a streamed request's error comes before any event.
func TestSDKErrors(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	ac, oc := f.anthropicClient("key-acme"), f.openaiClient("key-acme")
	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))}

	var ae *anthropic.Error
	stream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "no-such-model", MaxTokens: 8, Messages: user})
	events := 0
	for stream.Next() {
		events++
	}
	if err := stream.Err(); !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Type() != "not_found_error" || !strings.Contains(ae.Message, "no-such-model") || events != 0 {
		t.Fatalf("streamed unknown model: %d events, %v", events, err)
	}
	_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "stories260k", MaxTokens: 8, Messages: user},
		aoption.WithHeader("anthropic-version", "latest"))
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Type() != "invalid_request_error" || !strings.Contains(ae.Message, "anthropic-version") {
		t.Fatalf("malformed version: %v", err)
	}
	if ae.RequestID == "" {
		t.Errorf("no request-id on an error")
	}
	_, err = ac.Models.Get(ctx, "no-such-model", anthropic.ModelGetParams{})
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Type() != "not_found_error" {
		t.Fatalf("unknown model: %v", err)
	}

	var oe *openai.Error
	_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "stories260k", MaxTokens: openai.Int(0),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
	if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Type != "invalid_request_error" || oe.Code != string(contracts.CodeMaxTokensOutOfRange) || oe.Message == "" {
		t.Fatalf("max_tokens 0: %v", err)
	}
	// A path or method no route serves: the API's JSON error, not
	// ServeMux's plain text.
	err = oc.Get(ctx, "/no/such/route", nil, nil)
	if !errors.As(err, &oe) || oe.StatusCode != 404 || oe.Code != string(contracts.CodeNotFound) || !strings.Contains(oe.Message, "/v1/no/such/route") {
		t.Fatalf("unrouted: %v", err)
	}
	err = ac.Delete(ctx, "/v1/messages", nil, nil)
	if !errors.As(err, &ae) || ae.StatusCode != 405 || ae.Type() != "invalid_request_error" || ae.Response.Header.Get("Allow") != "POST" {
		t.Fatalf("wrong method: %v", err)
	}

	// Bodies refused whole: invalid UTF-8 (the SDKs cannot send it), and
	// a declared length over the limit, answered before the body is sent.
	resp, body := f.do(ctx, "POST", "/v1/chat/completions", "key-acme", "{\"model\":\"stories260k\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}")
	if resp.StatusCode != 400 || !strings.Contains(string(body), "UTF-8") {
		t.Fatalf("invalid UTF-8: %d %s", resp.StatusCode, body)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	conn.Write([]byte("POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: key-acme\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\nExpect: 100-continue\r\n\r\n"))
	head := make([]byte, 512)
	n, _ := conn.Read(head)
	if !bytes.HasPrefix(head[:n], []byte("HTTP/1.1 413")) {
		t.Fatalf("10 MB with Expect: 100-continue: %q", head[:n])
	}
}

// TestSDKMisc: models, count_tokens, max_tokens 0, the usage's cache
// fields.
func TestSDKMisc(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	ac, oc := f.anthropicClient("key-acme"), f.openaiClient("key-acme")
	page, err := ac.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != workertest.ModelName || page.Data[0].CreatedAt.IsZero() {
		t.Fatalf("anthropic models: %+v %v", page, err)
	}
	opage, err := oc.Models.List(ctx)
	if err != nil || len(opage.Data) != 1 || opage.Data[0].ID != workertest.ModelName || opage.Data[0].Created == 0 {
		t.Fatalf("openai models: %+v %v", opage, err)
	}
	if m, err := oc.Models.Get(ctx, workertest.ModelName); err != nil || m.ID != workertest.ModelName {
		t.Fatalf("openai model: %+v %v", m, err)
	}

	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Once upon a time there was a cat"))}
	count, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "stories260k", Messages: user})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "stories260k", MaxTokens: 4, Messages: user})
	if err != nil {
		t.Fatal(err)
	}
	if count.InputTokens == 0 || msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens != count.InputTokens {
		t.Fatalf("count_tokens %d; message usage %+v", count.InputTokens, msg.Usage)
	}
	zero, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "stories260k", MaxTokens: 0, Messages: user})
	if err != nil {
		t.Fatal(err)
	}
	if len(zero.Content) != 0 || zero.StopReason != anthropic.StopReasonMaxTokens || zero.Usage.OutputTokens != 0 || zero.Usage.InputTokens != count.InputTokens {
		t.Fatalf("max_tokens 0: %+v", zero)
	}
	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "stories260k", MaxCompletionTokens: openai.Int(4),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time there was a cat")}})
	if err != nil {
		t.Fatal(err)
	}
	if !cc.Usage.PromptTokensDetails.JSON.CachedTokens.Valid() || cc.Usage.PromptTokensDetails.CachedTokens > cc.Usage.PromptTokens {
		t.Fatalf("openai usage %+v", cc.Usage)
	}
}

// TestSDKOverloaded: a full job queue is a 529 overloaded_error to the
// Anthropic SDK (a 503 to OpenAI's).
func TestSDKOverloaded(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{JobsMaxMsgs: 1}) // no worker: the first job stays queued
	f := serveGateway(t, b, gateway.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ac := f.anthropicClient("key-acme")
	params := anthropic.MessageNewParams{Model: "stories260k", MaxTokens: 4,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))}}
	// The queue's one slot taken by a job no worker runs.
	if resp, body := f.do(ctx, "POST", "/v1/jobs", "key-acme", `{"model":"stories260k","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}`); resp.StatusCode != 202 {
		t.Fatalf("first job: %d %s", resp.StatusCode, body)
	}
	_, err := ac.Messages.New(ctx, params)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 529 {
		t.Fatalf("full queue: %v", err)
	}
	if ae.Type() != "overloaded_error" {
		t.Fatalf("overloaded: %v (type %q)", ae, ae.Type())
	}
	oc := f.openaiClient("key-acme")
	_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "stories260k",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}}, ooption.WithMaxRetries(0))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 503 || oe.Code != string(contracts.CodeOverloaded) {
		t.Fatalf("openai overloaded: %v", err)
	}
}

package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// chatLine is one line of an OpenAI batch input file: a chat completion
// of maxTokens tokens asking to continue prompt.
func chatLine(customID, prompt string, maxTokens int) string {
	body := map[string]any{"model": "stories260k", "max_tokens": maxTokens,
		"messages": []map[string]string{{"role": "user", "content": prompt}}}
	b, _ := json.Marshal(map[string]any{"custom_id": customID, "method": "POST", "url": "/v1/chat/completions", "body": body})
	return string(b) + "\n"
}

// uploadBatchFile uploads jsonl as a batch input file with the SDK.
func uploadBatchFile(t *testing.T, oc openai.Client, jsonl string) *openai.FileObject {
	t.Helper()
	f, err := oc.Files.New(context.Background(), openai.FileNewParams{File: openai.File(strings.NewReader(jsonl), "requests.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if f.Object != "file" || f.Bytes != int64(len(jsonl)) || f.Filename != "requests.jsonl" || f.Purpose != "batch" || !strings.Contains(f.RawJSON(), `"status":"processed"`) ||
		!strings.HasPrefix(f.ID, "file-") || time.Since(time.Unix(f.CreatedAt, 0)) > time.Minute || f.ExpiresAt <= f.CreatedAt {
		t.Fatalf("uploaded file %s", f.RawJSON())
	}
	return f
}

// newOpenAIBatch makes a chat completions batch of input file id.
func newOpenAIBatch(t *testing.T, oc openai.Client, fileID string) *openai.Batch {
	t.Helper()
	b, err := oc.Batches.New(context.Background(), openai.BatchNewParams{InputFileID: fileID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h, Metadata: map[string]string{"job": "nightly"}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Object != "batch" || !strings.HasPrefix(b.ID, "batch_") || b.InputFileID != fileID || b.Endpoint != "/v1/chat/completions" ||
		b.CompletionWindow != "24h" || b.Metadata["job"] != "nightly" || b.CreatedAt == 0 {
		t.Fatalf("new batch %s", b.RawJSON())
	}
	return b
}

// waitOpenAIBatch polls the batch until its status is one of the ends
// (completed, failed, expired, cancelled).
func waitOpenAIBatch(t *testing.T, oc openai.Client, id string) *openai.Batch {
	t.Helper()
	var b *openai.Batch
	natstest.Until(t, 90*time.Second, "the end of batch "+id, func() bool {
		var err error
		if b, err = oc.Batches.Get(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		switch b.Status {
		case "completed", "failed", "expired", "cancelled":
			return true
		}
		return false
	})
	return b
}

// batchOutLine is one line of a batch's output or error file.
type batchOutLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct{ Code, Message string } `json:"error"`
}

// fileLines reads file id's content with the SDK, one line each.
func fileLines(t *testing.T, oc openai.Client, id string) []batchOutLine {
	t.Helper()
	resp, err := oc.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []batchOutLine
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var o batchOutLine
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("output line %s: %v", l, err)
		}
		out = append(out, o)
	}
	return out
}

// countsAre reports whether b's request counts are total, completed and
// failed.
func countsAre(b *openai.Batch, total, completed, failed int64) bool {
	c := b.RequestCounts
	return c.Total == total && c.Completed == completed && c.Failed == failed
}

// statusOf is the HTTP status of an SDK call's error (0: not an API error).
func statusOf(err error) int {
	var ae *openai.Error
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	return 0
}

// TestOpenAIBatches: through the official SDK, a JSONL of chat
// completions uploaded as a file runs as a batch to completed; its output
// file answers each request that ran with a chat completion, under the
// caller's custom_id (not valid job ids), and its error file the requests
// refused; files are listed, read and deleted; a file that does not parse
// makes a failed batch with its errors; unsupported endpoints and purposes
// are refused; another tenant finds nothing of it.
func TestOpenAIBatches(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	oc := f.openaiClient("key-acme")

	ids := []string{"doc 1/a", "doc 2/b", "δ three", "doc.4"}
	var in strings.Builder
	for i, id := range ids {
		in.WriteString(chatLine(id, fmt.Sprintf("Once upon a time %d", i), 8+i))
	}
	// Refused by the chat completions mapping (n), by the contract (an
	// unknown model), and by batches (logprobs).
	in.WriteString(`{"custom_id":"two choices","method":"POST","url":"/v1/chat/completions","body":{"model":"stories260k","n":2,"messages":[{"role":"user","content":"hi"}]}}` + "\n\n")
	in.WriteString(`{"custom_id":"no such model","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-0","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}}` + "\n")
	in.WriteString(`{"custom_id":"logprobs","method":"POST","url":"/v1/chat/completions","body":{"model":"stories260k","logprobs":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}}` + "\n")
	file := uploadBatchFile(t, oc, in.String())
	batch := newOpenAIBatch(t, oc, file.ID)
	if batch.Status != "in_progress" || batch.RequestCounts.Total != 7 || batch.ExpiresAt < batch.CreatedAt+23*3600 {
		t.Fatalf("new batch %s", batch.RawJSON())
	}
	batch = waitOpenAIBatch(t, oc, batch.ID)
	if batch.Status != "completed" || !countsAre(batch, 7, 4, 3) ||
		batch.OutputFileID == "" || batch.ErrorFileID == "" || batch.CompletedAt < batch.CreatedAt || batch.FinalizingAt == 0 || batch.InProgressAt == 0 {
		t.Fatalf("completed batch %s", batch.RawJSON())
	}
	out := fileLines(t, oc, batch.OutputFileID)
	if len(out) != len(ids) {
		t.Fatalf("%d output lines for %d requests", len(out), len(ids))
	}
	for i, o := range out {
		var cc openai.ChatCompletion
		if o.CustomID != ids[i] || o.Error != nil || o.Response == nil || o.Response.StatusCode != 200 || o.Response.RequestID == "" ||
			json.Unmarshal(o.Response.Body, &cc) != nil {
			t.Fatalf("output line %d: %+v", i, o)
		}
		if cc.Object != "chat.completion" || cc.Model != "stories260k" || len(cc.Choices) != 1 || cc.Choices[0].Message.Content == "" ||
			cc.Choices[0].FinishReason != "length" || cc.Usage.CompletionTokens != int64(8+i) || cc.Usage.PromptTokens == 0 {
			t.Fatalf("output line %d: %s", i, o.Response.Body)
		}
	}
	errs := fileLines(t, oc, batch.ErrorFileID)
	if len(errs) != 3 || errs[0].CustomID != "two choices" || errs[0].Response == nil || errs[0].Response.StatusCode != 400 ||
		errs[1].CustomID != "no such model" || errs[1].Response == nil || errs[1].Response.StatusCode != 404 ||
		errs[2].CustomID != "logprobs" || errs[2].Response == nil || errs[2].Response.StatusCode != 400 {
		t.Fatalf("error lines %+v", errs)
	}
	var eb struct {
		Error struct{ Type, Code, Message string }
	}
	if json.Unmarshal(errs[1].Response.Body, &eb) != nil || eb.Error.Code != string(contracts.CodeUnknownModel) || eb.Error.Type != "not_found_error" {
		t.Fatalf("error body %s", errs[1].Response.Body)
	}
	outFile, err := oc.Files.Get(ctx, batch.OutputFileID)
	if err != nil || outFile.Purpose != "batch_output" || outFile.Bytes == 0 {
		t.Fatalf("output file %v %+v", err, outFile)
	}

	t.Run("validation", func(t *testing.T) {
		bad := chatLine("a", "hi", 8) + "not json\n" + `{"custom_id":"c","method":"GET","url":"/v1/chat/completions","body":{}}` + "\n" +
			chatLine("a", "again", 8) + `{"custom_id":"e","method":"POST","url":"/v1/completions","body":{}}` + "\n"
		b := newOpenAIBatch(t, oc, uploadBatchFile(t, oc, bad).ID)
		if b.Status != "failed" || b.FailedAt == 0 || b.OutputFileID != "" || len(b.Errors.Data) != 4 {
			t.Fatalf("batch of a bad file %s", b.RawJSON())
		}
		want := []struct {
			code string
			line int64
		}{{"invalid_json_line", 2}, {"invalid_method", 3}, {"duplicate_custom_id", 4}, {"mismatched_url", 5}}
		for i, w := range want {
			if e := b.Errors.Data[i]; e.Code != w.code || e.Line != w.line || e.Message == "" {
				t.Fatalf("error %d: %+v, want %+v", i, e, w)
			}
		}
		if got, err := oc.Batches.Get(ctx, b.ID); err != nil || got.Status != "failed" {
			t.Fatalf("failed batch again: %v %+v", err, got)
		}
	})

	t.Run("refused", func(t *testing.T) {
		_, err := oc.Batches.New(ctx, openai.BatchNewParams{InputFileID: file.ID, Endpoint: openai.BatchNewParamsEndpointV1Completions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Type != "invalid_request_error" || !strings.Contains(ae.Message, "/v1/chat/completions") {
			t.Fatalf("completions batch: %v", err)
		}
		if _, err := oc.Batches.New(ctx, openai.BatchNewParams{InputFileID: file.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: "1h"}); statusOf(err) != 400 {
			t.Fatalf("a 1h window: %v", err)
		}
		if _, err := oc.Batches.New(ctx, openai.BatchNewParams{InputFileID: "file-nope", Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h}); statusOf(err) != 404 {
			t.Fatalf("an unknown file: %v", err)
		}
		if _, err := oc.Batches.New(ctx, openai.BatchNewParams{InputFileID: batch.OutputFileID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h}); statusOf(err) != 400 {
			t.Fatalf("an output file as input: %v", err)
		}
		_, err = oc.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader("x"), "a.txt", "text/plain"), Purpose: openai.FilePurposeUserData})
		if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Message, `"batch"`) {
			t.Fatalf("purpose user_data: %v", err)
		}
		if _, err := oc.Batches.Get(ctx, "batch_nope"); statusOf(err) != 404 {
			t.Fatalf("an unknown batch: %v", err)
		}
	})

	t.Run("tenants", func(t *testing.T) {
		gc := f.openaiClient("key-globex")
		if _, err := gc.Files.Get(ctx, file.ID); statusOf(err) != 404 {
			t.Fatalf("globex gets acme's file: %v", err)
		}
		if _, err := gc.Files.Content(ctx, batch.OutputFileID); statusOf(err) != 404 {
			t.Fatalf("globex reads acme's output: %v", err)
		}
		if _, err := gc.Files.Delete(ctx, file.ID); statusOf(err) != 404 {
			t.Fatalf("globex deletes acme's file: %v", err)
		}
		if _, err := gc.Batches.Get(ctx, batch.ID); statusOf(err) != 404 {
			t.Fatalf("globex gets acme's batch: %v", err)
		}
		var ae *openai.Error
		if _, err := gc.Batches.Cancel(ctx, batch.ID); !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Type != "not_found_error" {
			t.Fatalf("globex cancels acme's batch: %v", err)
		}
		if _, err := gc.Batches.New(ctx, openai.BatchNewParams{InputFileID: file.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h}); statusOf(err) != 404 {
			t.Fatalf("globex makes a batch of acme's file: %v", err)
		}
		if fl, err := gc.Files.List(ctx, openai.FileListParams{}); err != nil || len(fl.Data) != 0 {
			t.Fatalf("globex lists files: %v %+v", err, fl)
		}
		if bl, err := gc.Batches.List(ctx, openai.BatchListParams{}); err != nil || len(bl.Data) != 0 {
			t.Fatalf("globex lists batches: %v %+v", err, bl)
		}
		// The native API does not find it either.
		if resp, _ := f.do(ctx, "GET", "/v1/zl/batches/"+batch.ID, "key-globex", ""); resp.StatusCode != 404 {
			t.Fatalf("globex, native: %d", resp.StatusCode)
		}
	})

	t.Run("list and delete", func(t *testing.T) {
		// Batches, newest first, paged.
		bl, err := oc.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(1)})
		if err != nil || len(bl.Data) != 1 || !bl.HasMore {
			t.Fatalf("batches, 1: %v %s", err, bl.RawJSON())
		}
		var all []string
		for it := oc.Batches.ListAutoPaging(ctx, openai.BatchListParams{Limit: openai.Int(1)}); it.Next(); {
			all = append(all, it.Current().ID)
		}
		if !slices.Contains(all, batch.ID) || len(all) < 2 || len(slices.Compact(slices.Clone(all))) != len(all) {
			t.Fatalf("all batches %v", all)
		}
		// Files: the input, the output, the errors (and the subtests').
		fl, err := oc.Files.List(ctx, openai.FileListParams{Purpose: openai.String("batch_output")})
		if err != nil || len(fl.Data) != 2 {
			t.Fatalf("output files: %v %s", err, fl.RawJSON())
		}
		var files []string
		for it := oc.Files.ListAutoPaging(ctx, openai.FileListParams{Limit: openai.Int(2), Order: openai.FileListParamsOrderAsc}); it.Next(); {
			files = append(files, it.Current().ID)
		}
		if len(files) < 3 || files[0] != file.ID || !slices.Contains(files, batch.OutputFileID) || !slices.Contains(files, batch.ErrorFileID) {
			t.Fatalf("files, oldest first: %v (input %s)", files, file.ID)
		}
		// The list object as sent.
		resp, body := f.do(ctx, "GET", "/v1/files?limit=1&order=asc", "key-acme", "")
		var page struct {
			Object  string
			HasMore bool   `json:"has_more"`
			FirstID string `json:"first_id"`
			LastID  string `json:"last_id"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &page) != nil || page.Object != "list" || !page.HasMore || page.FirstID != file.ID || page.LastID != file.ID {
			t.Fatalf("list: %d %s", resp.StatusCode, body)
		}
		del, err := oc.Files.Delete(ctx, file.ID)
		if err != nil || !del.Deleted || del.ID != file.ID || del.Object != "file" {
			t.Fatalf("delete: %v %+v", err, del)
		}
		if _, err := oc.Files.Get(ctx, file.ID); statusOf(err) != 404 {
			t.Fatalf("a deleted file: %v", err)
		}
		if _, err := oc.Files.Content(ctx, file.ID); statusOf(err) != 404 {
			t.Fatalf("a deleted file's content: %v", err)
		}
		// The batch made of it is not touched.
		if b, err := oc.Batches.Get(ctx, batch.ID); err != nil || b.Status != "completed" || len(fileLines(t, oc, b.OutputFileID)) != len(ids) {
			t.Fatalf("the batch of a deleted file: %v %+v", err, b)
		}
	})
}

// TestOpenAIBatchFileTooLarge: a file above the gateway's MaxBatchBytes is
// refused with 413.
func TestOpenAIBatchFileTooLarge(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	f := serveGateway(t, b, gateway.Config{MaxBatchBytes: 1000})
	oc := f.openaiClient("key-acme")
	var ae *openai.Error
	_, err := oc.Files.New(context.Background(), openai.FileNewParams{File: openai.File(strings.NewReader(strings.Repeat(chatLine("a", "hi", 8), 20)), "big.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch})
	if !errors.As(err, &ae) || ae.StatusCode != 413 || ae.Code != string(contracts.CodeRequestTooLarge) {
		t.Fatalf("a file too large: %v", err)
	}
	uploadBatchFile(t, oc, chatLine("a", "hi", 8))
}

// TestOpenAIBatchLineTooLong: an input line longer than a batch line may
// be (16 MiB) does not stop its batch: its request is refused as
// request_too_large, in the error file, and the lines around it run.
func TestOpenAIBatchLineTooLong(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	f := serveGateway(t, b, gateway.Config{})
	oc := f.openaiClient("key-acme")
	huge := chatLine("huge", strings.Repeat("once upon a time ", 1<<20), 8) // 17 MiB
	in := chatLine("a", "Once upon a time", 4) + huge + chatLine("b", "Once upon a time", 4)
	batch := waitOpenAIBatch(t, oc, newOpenAIBatch(t, oc, uploadBatchFile(t, oc, in).ID).ID)
	if batch.Status != "completed" || !countsAre(batch, 3, 2, 1) {
		t.Fatalf("batch %s", batch.RawJSON())
	}
	if out := fileLines(t, oc, batch.OutputFileID); len(out) != 2 || out[0].CustomID != "a" || out[1].CustomID != "b" {
		t.Fatalf("output lines %+v", out)
	}
	errs := fileLines(t, oc, batch.ErrorFileID)
	var eb struct {
		Error struct{ Code, Message string }
	}
	if len(errs) != 1 || errs[0].Response == nil || errs[0].Response.StatusCode != http.StatusRequestEntityTooLarge ||
		json.Unmarshal(errs[0].Response.Body, &eb) != nil || eb.Error.Code != string(contracts.CodeRequestTooLarge) || !strings.Contains(eb.Error.Message, "line 2 ") {
		t.Fatalf("error lines %+v", errs)
	}
}

// serveGateway serves a gateway on b with cfg (keys and models filled in)
// until the test ends.
func serveGateway(t *testing.T, b *workertest.Bundle, cfg gateway.Config) *gatewayFixture {
	t.Helper()
	gw, f := startGateway(t, b, cfg)
	t.Cleanup(func() { gw.Close() })
	return f
}

// startGateway starts a gateway on b with cfg (keys and models filled in);
// the caller closes it.
func startGateway(t *testing.T, b *workertest.Bundle, cfg gateway.Config) (*gateway.Gateway, *gatewayFixture) {
	t.Helper()
	cfg.Keys = plainKeys(t, "key-acme", "acme", "key-globex", "globex")
	cfg.Models = map[string]string{workertest.ModelName: modeltest.StoriesPath(t)}
	cfg.Logger = workertest.Logger(t)
	gw, err := gateway.New(b.Srv.Conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return gw, &gatewayFixture{t: t, url: srv.URL}
}

// longLines is a batch input of n requests of maxTokens tokens each.
func longLines(n, maxTokens int) string {
	var in strings.Builder
	for i := 0; i < n; i++ {
		in.WriteString(chatLine(fmt.Sprintf("story %d", i), fmt.Sprintf("Tell a long story %d", i), maxTokens))
	}
	return in.String()
}

// checkStopped checks a batch that was cancelled or expired: its counts
// add up, some lines were stopped (code in the error file), and the output
// and error files answer every line once, in order.
func checkStopped(t *testing.T, oc openai.Client, b *openai.Batch, lines int, code string) {
	t.Helper()
	c := b.RequestCounts
	if c.Total != int64(lines) || c.Completed+c.Failed != c.Total || c.Failed == 0 || b.OutputFileID == "" || b.ErrorFileID == "" {
		t.Fatalf("stopped batch %s", b.RawJSON())
	}
	out, errs := fileLines(t, oc, b.OutputFileID), fileLines(t, oc, b.ErrorFileID)
	if len(out) != int(c.Completed) || len(errs) != int(c.Failed) {
		t.Fatalf("%d output and %d error lines for counts %+v", len(out), len(errs), c)
	}
	seen := map[string]bool{}
	for _, o := range append(out, errs...) {
		seen[o.CustomID] = true
	}
	for _, e := range errs {
		if e.Response != nil || e.Error == nil || e.Error.Code != code {
			t.Fatalf("error line %+v, want code %s", e, code)
		}
	}
	if len(seen) != lines {
		t.Fatalf("%d custom_ids answered of %d", len(seen), lines)
	}
	t.Logf("%d completed, %d %s", c.Completed, c.Failed, code)
}

// TestOpenAIBatchCancel: a batch cancelled mid-run is cancelling, then
// cancelled with the output of the lines that finished and the others in
// the error file as batch_cancelled.
func TestOpenAIBatchCancel(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 1}), "w1")
	f := serveGateway(t, b, gateway.Config{})
	oc := f.openaiClient("key-acme")
	ctx := context.Background()
	batch := newOpenAIBatch(t, oc, uploadBatchFile(t, oc, longLines(6, 300)).ID)
	got, err := oc.Batches.Cancel(ctx, batch.ID)
	if err != nil || (got.Status != "cancelling" && got.Status != "cancelled") || got.CancellingAt == 0 {
		t.Fatalf("cancel: %v %+v", err, got)
	}
	batch = waitOpenAIBatch(t, oc, batch.ID)
	if batch.Status != "cancelled" || batch.CancelledAt == 0 || batch.CompletedAt != 0 {
		t.Fatalf("cancelled batch %s", batch.RawJSON())
	}
	checkStopped(t, oc, batch, 6, "batch_cancelled")
	// Cancelling it again answers it as it is.
	if again, err := oc.Batches.Cancel(ctx, batch.ID); err != nil || again.Status != "cancelled" {
		t.Fatalf("cancel again: %v %+v", err, again)
	}
	b.WaitDrained(t)
}

// TestOpenAIBatchExpiry: a batch still running when its completion window
// (Config.OpenAIBatchWindow, short here) passes has its remaining lines
// canceled and ends expired, with the output of what finished.
func TestOpenAIBatchExpiry(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 1}), "w1")
	f := serveGateway(t, b, gateway.Config{OpenAIBatchWindow: time.Second})
	oc := f.openaiClient("key-acme")
	batch := newOpenAIBatch(t, oc, uploadBatchFile(t, oc, longLines(80, 400)).ID)
	if batch.ExpiresAt-batch.CreatedAt > 2 {
		t.Fatalf("expires_at %d for created_at %d and a 1 s window", batch.ExpiresAt, batch.CreatedAt)
	}
	batch = waitOpenAIBatch(t, oc, batch.ID)
	if batch.Status != "expired" || batch.ExpiredAt == 0 {
		t.Fatalf("expired batch %s", batch.RawJSON())
	}
	checkStopped(t, oc, batch, 80, "batch_expired")
	b.WaitDrained(t)
}

// TestOpenAIBatchResume: an OpenAI batch whose gateway stops mid-run is
// finished by the next gateway on its own: every line answered once, in
// order, and billed once.
func TestOpenAIBatchResume(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 2}), "w1")
	const n = 8
	gw1, f1 := startGateway(t, b, gateway.Config{})
	oc1 := f1.openaiClient("key-acme")
	batch := newOpenAIBatch(t, oc1, uploadBatchFile(t, oc1, longLines(n, 200)).ID)
	gw1.Close() // the gateway stops mid-run
	// The state as the native API keeps it: still in progress.
	var st gateway.BatchState
	if _, body := f1.do(context.Background(), "GET", "/v1/zl/batches/"+batch.ID, "key-acme", ""); json.Unmarshal(body, &st) != nil || st.Status != "in_progress" || st.API != "openai" {
		t.Fatalf("after its gateway stopped: %s", body)
	}
	f2 := serveGateway(t, b, gateway.Config{})
	oc2 := f2.openaiClient("key-acme")
	batch = waitOpenAIBatch(t, oc2, batch.ID)
	if batch.Status != "completed" || !countsAre(batch, n, n, 0) || batch.OutputFileID == "" || batch.ErrorFileID != "" {
		t.Fatalf("resumed batch %s", batch.RawJSON())
	}
	out := fileLines(t, oc2, batch.OutputFileID)
	if len(out) != n {
		t.Fatalf("%d output lines for %d requests", len(out), n)
	}
	for i, o := range out {
		if o.CustomID != fmt.Sprintf("story %d", i) || o.Response == nil || o.Response.StatusCode != http.StatusOK {
			t.Fatalf("output line %d: %+v", i, o)
		}
	}
	b.WaitDrained(t)
	if got := len(workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))); got != n {
		t.Fatalf("%d usage records for %d lines", got, n)
	}
}

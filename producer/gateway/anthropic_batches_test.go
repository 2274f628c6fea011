package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// batchRequest is a Message Batches request of custom_id id: prompt, to
// at most maxTokens tokens.
func batchRequest(id, prompt string, maxTokens int64) anthropic.MessageBatchNewParamsRequest {
	return anthropic.MessageBatchNewParamsRequest{CustomID: id, Params: anthropic.MessageBatchNewParamsRequestParams{
		Model: "stories260k", MaxTokens: maxTokens,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}}
}

// waitMessageBatch polls the batch through the SDK until done says so,
// and returns it.
func waitMessageBatch(t *testing.T, ac anthropic.Client, id, what string, done func(*anthropic.MessageBatch) bool) *anthropic.MessageBatch {
	t.Helper()
	var mb *anthropic.MessageBatch
	natstest.Until(t, 60*time.Second, what+" of message batch "+id, func() bool {
		var err error
		mb, err = ac.Messages.Batches.Get(context.Background(), id, anthropic.MessageBatchGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		return done(mb)
	})
	return mb
}

// waitEnded polls the batch until it has ended.
func waitEnded(t *testing.T, ac anthropic.Client, id string) *anthropic.MessageBatch {
	t.Helper()
	return waitMessageBatch(t, ac, id, "the end", func(mb *anthropic.MessageBatch) bool {
		return mb.ProcessingStatus == anthropic.MessageBatchProcessingStatusEnded
	})
}

// batchResults reads the batch's results through the SDK.
func batchResults(t *testing.T, ac anthropic.Client, id string) []anthropic.MessageBatchIndividualResponse {
	t.Helper()
	stream := ac.Messages.Batches.ResultsStreaming(context.Background(), id, anthropic.MessageBatchResultsParams{})
	defer stream.Close()
	var out []anthropic.MessageBatchIndividualResponse
	for stream.Next() {
		out = append(out, stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("results of %s: %v", id, err)
	}
	return out
}

// apiError checks that err is the SDK's error for status and error type,
// and returns its message.
func apiError(t *testing.T, err error, status int, typ string) string {
	t.Helper()
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != status || string(ae.Type()) != typ {
		t.Fatalf("want a %d %s error, got %v", status, typ, err)
	}
	return ae.Message
}

// requestCounts is a batch's request counts, comparable: processing,
// succeeded, errored, canceled, expired.
type requestCounts [5]int64

func countsOf(c anthropic.MessageBatchRequestCounts) requestCounts {
	return requestCounts{c.Processing, c.Succeeded, c.Errored, c.Canceled, c.Expired}
}

// counted is the sum of a batch's request counts.
func counted(c anthropic.MessageBatchRequestCounts) int64 {
	return c.Processing + c.Succeeded + c.Errored + c.Canceled + c.Expired
}

// batchGateway is a gateway of cfg (its keys and models filled in) on its
// own JetStream, with a worker that runs one job at a time, so that a
// batch's later lines wait. serve starts another gateway on the same
// JetStream.
func batchGateway(t *testing.T, cfg gateway.Config) (b *workertest.Bundle, serve func() (*gateway.Gateway, *gatewayFixture)) {
	t.Helper()
	b = workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 1}), "w1")
	cfg.Keys = plainKeys(t, "key-acme", "acme", "key-globex", "globex")
	cfg.Models = map[string]string{workertest.ModelName: modeltest.StoriesPath(t)}
	cfg.Logger = workertest.Logger(t)
	return b, func() (*gateway.Gateway, *gatewayFixture) {
		gw, err := gateway.New(b.Srv.Conn, cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(func() { srv.Close(); gw.Close() })
		return gw, &gatewayFixture{t: t, url: srv.URL}
	}
}

// TestMessageBatches: a batch made with the official SDK runs to its end;
// its results are its requests' messages in input order; a batch with a
// bad request is refused whole, naming it; another tenant finds nothing of
// the batch on any endpoint.
func TestMessageBatches(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	ac := f.anthropicClient("key-acme")

	var reqs []anthropic.MessageBatchNewParamsRequest
	for i := range 5 {
		reqs = append(reqs, batchRequest(fmt.Sprintf("doc-%d", i), fmt.Sprintf("Once upon a time %d", i), int64(8+i)))
	}
	reqs[2].Params.System = []anthropic.TextBlockParam{{Text: "Be brief."}}
	reqs[2].Params.Metadata = anthropic.MetadataParam{UserID: anthropic.String("user-7")}
	// A model that is not served: the job fails, the request errors.
	unserved := batchRequest("doc-5", "Once upon a time", 8)
	unserved.Params.Model = "no-such-model"
	reqs = append(reqs, unserved)
	mb, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(mb.ID, "msgbatch_") || mb.ProcessingStatus != anthropic.MessageBatchProcessingStatusInProgress ||
		mb.RequestCounts.Processing != 6 || counted(mb.RequestCounts) != 6 || mb.ExpiresAt.Sub(mb.CreatedAt) != 24*time.Hour ||
		!mb.EndedAt.IsZero() || mb.ResultsURL != "" || !mb.CancelInitiatedAt.IsZero() || !mb.ArchivedAt.IsZero() {
		t.Fatalf("new batch %s", mb.RawJSON())
	}
	if time.Since(mb.CreatedAt) > time.Minute || time.Since(mb.CreatedAt) < 0 {
		t.Fatalf("created at %v", mb.CreatedAt)
	}

	ended := waitEnded(t, ac, mb.ID)
	if countsOf(ended.RequestCounts) != (requestCounts{0, 5, 1, 0, 0}) ||
		ended.EndedAt.Before(ended.CreatedAt) || ended.ResultsURL != f.url+"/v1/messages/batches/"+mb.ID+"/results" {
		t.Fatalf("ended batch %s", ended.RawJSON())
	}
	results := batchResults(t, ac, mb.ID)
	if len(results) != 6 {
		t.Fatalf("%d results for 6 requests", len(results))
	}
	if e := results[5].Result.Error.Error; results[5].CustomID != "doc-5" || results[5].Result.Type != "errored" ||
		e.Type != "not_found_error" || !strings.Contains(e.Message, "no-such-model") {
		t.Fatalf("result 5: %s", results[5].RawJSON())
	}
	for i, r := range results[:5] {
		m := r.Result.Message
		if r.CustomID != fmt.Sprintf("doc-%d", i) || r.Result.Type != "succeeded" || m.ID != mb.ID+"-"+r.CustomID || m.Model != "stories260k" ||
			len(m.Content) != 1 || m.Content[0].Text == "" || m.Usage.InputTokens == 0 || m.Usage.OutputTokens != int64(8+i) || m.StopReason != anthropic.StopReasonMaxTokens {
			t.Fatalf("result %d: %s", i, r.RawJSON())
		}
	}
	// The same results as a raw call shows them: JSONL.
	resp, body := f.do(ctx, "GET", "/v1/messages/batches/"+mb.ID+"/results", "key-acme", "")
	defer func() {
		if t.Failed() {
			return
		}
		// Forced tool calls in a batch: one whole, one cut short by
		// max_tokens, answered as the Messages endpoint answers them.
		whole, cut := batchRequest("call", "Weather?", 96), batchRequest("cut", "Weather?", 3)
		for _, r := range []*anthropic.MessageBatchNewParamsRequest{&whole, &cut} {
			r.Params.Tools, r.Params.ToolChoice = anthropicTools(t, "get_weather"), anthropic.ToolChoiceParamOfTool("get_weather")
		}
		tb, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: []anthropic.MessageBatchNewParamsRequest{whole, cut}})
		if err != nil {
			t.Fatal(err)
		}
		waitEnded(t, ac, tb.ID)
		tr := batchResults(t, ac, tb.ID)
		if len(tr) != 2 || tr[0].Result.Type != "succeeded" || tr[1].Result.Type != "succeeded" {
			t.Fatalf("tool call results: %+v", tr)
		}
		call, short := tr[0].Result.Message, tr[1].Result.Message
		if call.StopReason != anthropic.StopReasonToolUse || len(call.Content) != 1 || call.Content[0].Type != "tool_use" || call.Content[0].Name != "get_weather" {
			t.Fatalf("whole call: %s", tr[0].RawJSON())
		}
		checkArgs(t, "get_weather", string(call.Content[0].Input))
		if short.StopReason != anthropic.StopReasonMaxTokens {
			t.Fatalf("call cut short: %s", tr[1].RawJSON())
		}
	}()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-jsonl" || strings.Count(string(body), "\n") != 6 {
		t.Fatalf("raw results: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	t.Run("refused", func(t *testing.T) {
		tooLong := batchRequest("b", "hi", 100_000)
		noMessages := batchRequest("b", "hi", 8)
		noMessages.Params.Messages = nil
		cases := []struct {
			name string
			reqs []anthropic.MessageBatchNewParamsRequest
			want string
		}{
			{"max_tokens too high", []anthropic.MessageBatchNewParamsRequest{batchRequest("a", "hi", 8), tooLong}, "max_tokens_out_of_range: requests[1].params.max_tokens"},
			{"repeated custom_id", []anthropic.MessageBatchNewParamsRequest{batchRequest("a", "hi", 8), batchRequest("a", "hi", 8)}, `requests[1].custom_id: custom_id "a" repeats requests[0]'s`},
			{"bad custom_id", []anthropic.MessageBatchNewParamsRequest{batchRequest("a b", "hi", 8)}, `requests[0].custom_id: custom_id "a b"`},
			{"long custom_id", []anthropic.MessageBatchNewParamsRequest{batchRequest(strings.Repeat("x", 65), "hi", 8)}, "requests[0].custom_id"},
			{"no messages", []anthropic.MessageBatchNewParamsRequest{batchRequest("a", "hi", 8), noMessages}, "requests[1].params.messages"},
			{"no requests", []anthropic.MessageBatchNewParamsRequest{}, "requests"},
		}
		for _, c := range cases {
			_, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: c.reqs})
			if msg := apiError(t, err, 400, "invalid_request_error"); !strings.Contains(msg, c.want) {
				t.Errorf("%s: %q, want it to hold %q", c.name, msg, c.want)
			}
		}
		// stream: true: a batch's results are whole messages.
		streamed := batchRequest("a", "hi", 8)
		streamed.Params.Stream = anthropic.Bool(true)
		_, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: []anthropic.MessageBatchNewParamsRequest{streamed}})
		if msg := apiError(t, err, 400, "invalid_request_error"); !strings.Contains(msg, "requests[0].params.stream") {
			t.Errorf("stream: true: %q", msg)
		}
		// Nothing refused was made: the tenant has its one batch.
		page, err := ac.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{})
		if err != nil || len(page.Data) != 1 || page.Data[0].ID != mb.ID || page.HasMore {
			t.Fatalf("list after the refusals: %v %+v", err, page)
		}
	})

	t.Run("tenants", func(t *testing.T) {
		gc := f.anthropicClient("key-globex")
		_, err := gc.Messages.Batches.Get(ctx, mb.ID, anthropic.MessageBatchGetParams{})
		apiError(t, err, 404, "not_found_error")
		_, err = gc.Messages.Batches.Cancel(ctx, mb.ID, anthropic.MessageBatchCancelParams{})
		apiError(t, err, 404, "not_found_error")
		_, err = gc.Messages.Batches.Delete(ctx, mb.ID, anthropic.MessageBatchDeleteParams{})
		apiError(t, err, 404, "not_found_error")
		stream := gc.Messages.Batches.ResultsStreaming(ctx, mb.ID, anthropic.MessageBatchResultsParams{})
		for stream.Next() {
			t.Fatalf("another tenant read a result: %s", stream.Current().RawJSON())
		}
		apiError(t, stream.Err(), 404, "not_found_error")
		stream.Close()
		if page, err := gc.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{}); err != nil || len(page.Data) != 0 {
			t.Fatalf("another tenant's list: %v %+v", err, page)
		}
		// Nor is a native batch of the tenant a message batch.
		if resp, body := f.do(ctx, "POST", "/v1/zl/batches?id=msgbatch_native", "key-acme",
			`{"custom_id":"a","request":{"model":"stories260k","messages":[{"role":"user","content":"hi"}],"max_tokens":4}}`); resp.StatusCode != 202 {
			t.Fatalf("native batch: %d %s", resp.StatusCode, body)
		}
		_, err = ac.Messages.Batches.Get(ctx, "msgbatch_native", anthropic.MessageBatchGetParams{})
		apiError(t, err, 404, "not_found_error")
		f.waitBatch(ctx, "msgbatch_native") // not left running as the gateway closes
	})
}

// TestMessageBatchCancel: canceling a running batch ends it with the
// requests that had not finished canceled, the counts adding up to the
// requests; before it ends its results and its deletion are refused.
func TestMessageBatchCancel(t *testing.T) {
	t.Parallel()
	b, serve := batchGateway(t, gateway.Config{})
	_, f := serve()
	ctx := context.Background()
	ac := f.anthropicClient("key-acme")
	var reqs []anthropic.MessageBatchNewParamsRequest
	for i := range 20 {
		reqs = append(reqs, batchRequest(fmt.Sprintf("long-%d", i), fmt.Sprintf("Tell a long story %d", i), 4000))
	}
	mb, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	// Cancel once a first job has ended (it has a usage record): the
	// lines run in no set order, one at a time, about 0.3 s each.
	usage, err := b.Srv.JS.Stream(ctx, contracts.StreamUsage)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Until(t, 30*time.Second, "a first job's end", func() bool {
		info, err := usage.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs > 0
	})

	stream := ac.Messages.Batches.ResultsStreaming(ctx, mb.ID, anthropic.MessageBatchResultsParams{})
	for stream.Next() {
		t.Fatalf("a result before the end: %s", stream.Current().RawJSON())
	}
	apiError(t, stream.Err(), 400, "invalid_request_error")
	stream.Close()
	_, err = ac.Messages.Batches.Delete(ctx, mb.ID, anthropic.MessageBatchDeleteParams{})
	apiError(t, err, 400, "invalid_request_error")

	canceling, err := ac.Messages.Batches.Cancel(ctx, mb.ID, anthropic.MessageBatchCancelParams{})
	if err != nil {
		t.Fatal(err)
	}
	if canceling.ProcessingStatus != anthropic.MessageBatchProcessingStatusCanceling || canceling.CancelInitiatedAt.IsZero() {
		t.Fatalf("canceled batch %s", canceling.RawJSON())
	}
	ended := waitEnded(t, ac, mb.ID)
	n := ended.RequestCounts
	if n.Succeeded == 0 || n.Canceled == 0 || n.Succeeded+n.Canceled != 20 || counted(n) != 20 || !ended.CancelInitiatedAt.Equal(canceling.CancelInitiatedAt) {
		t.Fatalf("ended batch %s", ended.RawJSON())
	}
	results := batchResults(t, ac, mb.ID)
	var types []string
	for i, r := range results {
		if r.CustomID != reqs[i].CustomID {
			t.Fatalf("result %d is %s's", i, r.CustomID)
		}
		types = append(types, r.Result.Type)
	}
	if len(results) != 20 || slices.Contains(types, "errored") || slices.Contains(types, "expired") ||
		int64(strings.Count(strings.Join(types, " "), "canceled")) != n.Canceled {
		t.Fatalf("results %v, counts %+v", types, n)
	}
	// Canceling an ended batch changes nothing.
	again, err := ac.Messages.Batches.Cancel(ctx, mb.ID, anthropic.MessageBatchCancelParams{})
	if err != nil || again.ProcessingStatus != anthropic.MessageBatchProcessingStatusEnded || countsOf(again.RequestCounts) != countsOf(n) {
		t.Fatalf("cancel after the end: %v %+v", err, again)
	}
	t.Logf("%d succeeded, %d canceled", n.Succeeded, n.Canceled)
}

// TestMessageBatchList: the list is newest first, a page at a time, by
// either cursor; a deleted batch is gone from it and from Get.
func TestMessageBatchList(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	ac := f.anthropicClient("key-acme")
	var ids []string // oldest first
	for i := range 5 {
		mb, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: []anthropic.MessageBatchNewParamsRequest{
			batchRequest("only", fmt.Sprintf("Once upon a time %d", i), 4)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, mb.ID)
		time.Sleep(2 * time.Millisecond) // ids sort by the millisecond
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	idsOf := func(bs []anthropic.MessageBatch) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.ID)
		}
		return out
	}

	page, err := ac.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(2)})
	if err != nil || !slices.Equal(idsOf(page.Data), newest[:2]) || !page.HasMore || page.FirstID != newest[0] || page.LastID != newest[1] {
		t.Fatalf("first page: %v %+v", err, page)
	}
	next, err := page.GetNextPage()
	if err != nil || !slices.Equal(idsOf(next.Data), newest[2:4]) || !next.HasMore {
		t.Fatalf("second page: %v %+v", err, next)
	}
	var all []string
	iter := ac.Messages.Batches.ListAutoPaging(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(2)})
	for iter.Next() {
		all = append(all, iter.Current().ID)
	}
	if iter.Err() != nil || !slices.Equal(all, newest) {
		t.Fatalf("auto-paging: %v %v, want %v", iter.Err(), all, newest)
	}
	before, err := ac.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(2), BeforeID: anthropic.String(ids[0])})
	if err != nil || !slices.Equal(idsOf(before.Data), []string{ids[2], ids[1]}) || !before.HasMore {
		t.Fatalf("before the oldest: %v %+v", err, before)
	}
	_, err = ac.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(1001)})
	apiError(t, err, 400, "invalid_request_error")

	// Delete the middle one once it has ended.
	waitEnded(t, ac, ids[2])
	del, err := ac.Messages.Batches.Delete(ctx, ids[2], anthropic.MessageBatchDeleteParams{})
	if err != nil || del.ID != ids[2] || del.Type != "message_batch_deleted" {
		t.Fatalf("delete: %v %+v", err, del)
	}
	_, err = ac.Messages.Batches.Get(ctx, ids[2], anthropic.MessageBatchGetParams{})
	apiError(t, err, 404, "not_found_error")
	_, err = ac.Messages.Batches.Delete(ctx, ids[2], anthropic.MessageBatchDeleteParams{})
	apiError(t, err, 404, "not_found_error")
	// The deleted id still works as a cursor.
	page, err = ac.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{AfterID: anthropic.String(ids[2])})
	if err != nil || !slices.Equal(idsOf(page.Data), []string{ids[1], ids[0]}) || page.HasMore {
		t.Fatalf("after the deleted one: %v %+v", err, page)
	}
	page, err = ac.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{})
	if err != nil || !slices.Equal(idsOf(page.Data), []string{ids[4], ids[3], ids[1], ids[0]}) || page.HasMore {
		t.Fatalf("after the delete: %v %+v", err, page)
	}
	for _, id := range []string{ids[4], ids[3], ids[1], ids[0]} {
		waitEnded(t, ac, id) // none left running as the gateway closes
	}
}

// TestMessageBatchExpiry: a batch that has not ended by its expiry ends
// with its unfinished requests expired, the finished ones kept.
func TestMessageBatchExpiry(t *testing.T) {
	t.Parallel()
	// Long enough for the short request to finish first; under -short
	// (the -race run of make test) the model runs several times slower.
	expiry := 3 * time.Second
	if testing.Short() {
		expiry = 10 * time.Second
	}
	_, serve := batchGateway(t, gateway.Config{AnthropicBatchExpiry: expiry})
	_, f := serve()
	ctx := context.Background()
	ac := f.anthropicClient("key-acme")
	reqs := []anthropic.MessageBatchNewParamsRequest{batchRequest("short", "Once upon a time", 8)}
	for i := range 30 {
		reqs = append(reqs, batchRequest(fmt.Sprintf("long-%d", i), fmt.Sprintf("Tell a long story %d", i), 4000))
	}
	mb, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	if mb.ExpiresAt.Sub(mb.CreatedAt) != expiry {
		t.Fatalf("expires at %v, created at %v", mb.ExpiresAt, mb.CreatedAt)
	}
	ended := waitEnded(t, ac, mb.ID)
	n := ended.RequestCounts
	if n.Succeeded == 0 || n.Expired == 0 || n.Canceled != 0 || n.Errored != 0 || counted(n) != 31 || ended.EndedAt.Before(mb.ExpiresAt) {
		t.Fatalf("expired batch %s", ended.RawJSON())
	}
	results := batchResults(t, ac, mb.ID)
	expired := 0
	for i, r := range results {
		if r.CustomID != reqs[i].CustomID || r.Result.Type != "succeeded" && r.Result.Type != "expired" {
			t.Fatalf("result %d: %s", i, r.RawJSON())
		}
		if r.Result.Type == "expired" {
			expired++
		}
	}
	if len(results) != 31 || int64(expired) != n.Expired {
		t.Fatalf("%d results, %d expired; counts %+v", len(results), expired, n)
	}
	t.Logf("%d succeeded, %d expired", n.Succeeded, n.Expired)
}

// TestMessageBatchResume: a batch whose gateway stops mid-run finishes on
// the next gateway by itself, every request answered once and billed once;
// a run that stopped with an error runs again when the batch is read.
func TestMessageBatchResume(t *testing.T) {
	t.Parallel()
	b, serve := batchGateway(t, gateway.Config{})
	gw1, f1 := serve()
	ctx := context.Background()
	var reqs []anthropic.MessageBatchNewParamsRequest
	for i := range 8 {
		reqs = append(reqs, batchRequest(fmt.Sprintf("doc-%d", i), fmt.Sprintf("Tell a long story %d", i), 300))
	}
	ac1 := f1.anthropicClient("key-acme")
	mb, err := ac1.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	gw1.Close() // the gateway stops mid-run
	if st, err := ac1.Messages.Batches.Get(ctx, mb.ID, anthropic.MessageBatchGetParams{}); err != nil ||
		st.ProcessingStatus != anthropic.MessageBatchProcessingStatusInProgress {
		t.Fatalf("after its gateway stopped: %v %+v", err, st)
	}
	_, f2 := serve()
	ac := f2.anthropicClient("key-acme")
	ended := waitEnded(t, ac, mb.ID)
	if countsOf(ended.RequestCounts) != (requestCounts{0, 8, 0, 0, 0}) {
		t.Fatalf("resumed batch %s", ended.RawJSON())
	}
	results := batchResults(t, ac, mb.ID)
	if len(results) != 8 {
		t.Fatalf("%d results for 8 requests", len(results))
	}
	for i, r := range results {
		if r.CustomID != reqs[i].CustomID || r.Result.Type != "succeeded" || r.Result.Message.Usage.OutputTokens != 300 {
			t.Fatalf("result %d: %s", i, r.RawJSON())
		}
	}
	b.WaitDrained(t)
	usage := workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))
	jobs := map[string]int{}
	for _, m := range usage {
		var u contracts.Usage
		if err := json.Unmarshal(m.Data(), &u); err != nil {
			t.Fatal(err)
		}
		jobs[u.JobID]++
	}
	if len(usage) != 8 || len(jobs) != 8 {
		t.Fatalf("%d usage records for 8 requests: %v", len(usage), jobs)
	}
	for _, r := range reqs {
		if jobs[mb.ID+"-"+r.CustomID] != 1 {
			t.Fatalf("request %s billed %d times", r.CustomID, jobs[mb.ID+"-"+r.CustomID])
		}
	}

	// A run that stopped with an error (as when the output could not be
	// stored) runs again when the batch is read, from the stored results:
	// nothing runs or is billed twice.
	kv, err := b.Srv.JS.KeyValue(ctx, gateway.BatchStates)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "acme."+mb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var st gateway.BatchState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatal(err)
	}
	st.Error = "storing the output: simulated"
	raw, _ := json.Marshal(st)
	if _, err := kv.Put(ctx, "acme."+mb.ID, raw); err != nil {
		t.Fatal(err)
	}
	if again, err := ac.Messages.Batches.Get(ctx, mb.ID, anthropic.MessageBatchGetParams{}); err != nil ||
		again.ProcessingStatus != anthropic.MessageBatchProcessingStatusInProgress {
		t.Fatalf("a batch whose run stopped: %v %+v", err, again)
	}
	if ended := waitEnded(t, ac, mb.ID); countsOf(ended.RequestCounts) != (requestCounts{0, 8, 0, 0, 0}) {
		t.Fatalf("run again: %s", ended.RawJSON())
	}
	if results := batchResults(t, ac, mb.ID); len(results) != 8 || results[7].Result.Type != "succeeded" {
		t.Fatalf("results after the run again: %d", len(results))
	}
	if n := len(workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))); n != 8 {
		t.Fatalf("%d usage records for 8 requests after the run again", n)
	}
}

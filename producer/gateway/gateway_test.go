package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// gatewayFixture is a gateway in front of a real worker on stories260K,
// with keys for two tenants.
type gatewayFixture struct {
	t   *testing.T
	url string
	reg *prometheus.Registry
}

func newGateway(t *testing.T) *gatewayFixture {
	t.Helper()
	return newGatewayWith(t, sched.Config{})
}

// newGatewayWith is newGateway with the worker's scheduler configured by
// cfg.
func newGatewayWith(t *testing.T, cfg sched.Config) *gatewayFixture {
	t.Helper()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, cfg), "w1")
	reg := prometheus.NewRegistry()
	gm := gateway.NewMetrics()
	if err := gm.Register(reg); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(b.Srv.Conn, gateway.Config{Keys: plainKeys(t, "key-acme", "acme", "key-globex", "globex"),
		Models: map[string]string{workertest.ModelName: modeltest.StoriesPath(t)}, Logger: workertest.Logger(t), Metrics: gm})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() { srv.Close(); gw.Close() })
	return &gatewayFixture{t: t, url: srv.URL, reg: reg}
}

// plainKeys is a keyring of plain-text keys, as ZEROLAYER_API_KEYS gives:
// key, tenant, key, tenant, ….
func plainKeys(t *testing.T, kv ...string) *gateway.Keyring {
	t.Helper()
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	k, err := gateway.NewKeyring(gateway.KeyringConfig{Keys: m})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// do sends a request with key and returns the status and body.
func (f *gatewayFixture) do(ctx context.Context, method, path, key, body string, hdr ...string) (*http.Response, []byte) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, f.url+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// sseEvent is one server-sent event.
type sseEvent struct{ id, name, data string }

func parseSSE(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

func errorCode(t *testing.T, body []byte) contracts.Code {
	t.Helper()
	var v struct {
		Error struct {
			Code contracts.Code `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return v.Error.Code
}

// waitResult polls the job's result until it is there (200); a status
// other than 202 (not yet) fails the test.
func (f *gatewayFixture) waitResult(ctx context.Context, id string) contracts.Result {
	f.t.Helper()
	var res contracts.Result
	natstest.Until(f.t, 30*time.Second, "the result of job "+id, func() bool {
		resp, body := f.do(ctx, "GET", "/v1/jobs/"+id, "key-acme", "")
		switch resp.StatusCode {
		case 200:
			if err := json.Unmarshal(body, &res); err != nil {
				f.t.Fatalf("result %s: %v", body, err)
			}
			return true
		case 202:
			return false
		}
		f.t.Fatalf("poll: %d %s", resp.StatusCode, body)
		return false
	})
	return res
}

// waitBatch polls the batch's state until it has ended.
func (f *gatewayFixture) waitBatch(ctx context.Context, id string) gateway.BatchState {
	f.t.Helper()
	var st gateway.BatchState
	natstest.Until(f.t, 60*time.Second, "the end of batch "+id, func() bool {
		_, body := f.do(ctx, "GET", "/v1/zl/batches/"+id, "key-acme", "")
		if err := json.Unmarshal(body, &st); err != nil {
			f.t.Fatalf("state %s: %v", body, err)
		}
		return st.Status == "ended"
	})
	return st
}

// TestGatewayJobs: submit, poll, follow events (and resume them), tenant
// isolation, cancel, and the errors of bad calls.
func TestGatewayJobs(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	req := `{"model":"stories260k","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":12,"temperature":0}`

	if resp, body := f.do(ctx, "POST", "/v1/jobs", "", req); resp.StatusCode != 401 || errorCode(t, body) != contracts.CodeUnauthenticated {
		t.Fatalf("no key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := f.do(ctx, "POST", "/v1/jobs", "nope", req); resp.StatusCode != 401 {
		t.Fatalf("bad key: %d", resp.StatusCode)
	}
	if resp, body := f.do(ctx, "POST", "/v1/jobs", "key-acme", `{"model":"stories260k","messages":[]}`); resp.StatusCode != 400 || errorCode(t, body) != contracts.CodeMissingMessages {
		t.Fatalf("no messages: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do(ctx, "POST", "/v1/jobs", "key-acme", `{"model":`); resp.StatusCode != 400 || errorCode(t, body) != contracts.CodeMalformedJSON {
		t.Fatalf("bad JSON: %d %s", resp.StatusCode, body)
	}

	resp, body := f.do(ctx, "POST", "/v1/jobs", "key-acme", req)
	if resp.StatusCode != 202 {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	var sub struct{ ID string }
	json.Unmarshal(body, &sub)
	res := f.waitResult(ctx, sub.ID)
	if res.Status != contracts.StatusCompleted || res.Usage.OutputTokens != 12 || res.Tenant != "acme" {
		t.Fatalf("result %+v", res)
	}
	// Another tenant sees nothing of it: the same id is another job of
	// its own, never submitted (404 not_found), with no events (followed
	// until the caller gives up), and canceling it touches only that one.
	if resp, body := f.do(ctx, "GET", "/v1/jobs/"+sub.ID, "key-globex", ""); resp.StatusCode != 404 || errorCode(t, body) != contracts.CodeNotFound {
		t.Fatalf("another tenant's job: %d %s", resp.StatusCode, body)
	}
	short, stop := context.WithTimeout(ctx, time.Second)
	if resp, body := f.do(short, "GET", "/v1/jobs/"+sub.ID+"/events", "key-globex", ""); len(parseSSE(t, body)) != 0 {
		t.Fatalf("another tenant got events: %d %s", resp.StatusCode, body)
	}
	stop()
	if resp, body := f.do(ctx, "POST", "/v1/jobs/"+sub.ID+"/cancel", "key-globex", ""); resp.StatusCode != 202 {
		t.Fatalf("canceling its own job of another tenant's id: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do(ctx, "GET", "/v1/jobs/"+sub.ID, "key-acme", ""); resp.StatusCode != 200 || !strings.Contains(string(body), `"completed"`) {
		t.Fatalf("acme's job after globex canceled the same id: %d %s", resp.StatusCode, body)
	}

	// Events: the deltas make the result's text; resuming from an id
	// gives only what came after it.
	_, body = f.do(ctx, "GET", "/v1/jobs/"+sub.ID+"/events", "key-acme", "")
	evs := parseSSE(t, body)
	var text strings.Builder
	for _, e := range evs {
		var ev contracts.Event
		if err := json.Unmarshal([]byte(e.data), &ev); err != nil || string(ev.Type) != e.name {
			t.Fatalf("event %+v: %v", e, err)
		}
		if ev.Type == contracts.EventDelta {
			text.WriteString(ev.Text)
		}
	}
	if len(evs) < 3 || evs[len(evs)-1].name != "final" || text.String() != res.Text {
		t.Fatalf("%d events, last %+v; text %q, result %q", len(evs), evs[len(evs)-1], text.String(), res.Text)
	}
	_, body = f.do(ctx, "GET", "/v1/jobs/"+sub.ID+"/events", "key-acme", "", "Last-Event-ID", evs[1].id)
	if rest := parseSSE(t, body); len(rest) != len(evs)-2 || rest[0].id != evs[2].id {
		t.Fatalf("resumed after %s: %d events, want %d", evs[1].id, len(rest), len(evs)-2)
	}

	// Cancel a long job: the regex admits no end before 5,000 characters (a
	// story a fast machine finishes at its end of text can be over before
	// the cancel lands).
	resp, body = f.do(ctx, "POST", "/v1/jobs", "key-acme", `{"model":"stories260k","messages":[{"role":"user","content":"Tell a long story"}],"max_tokens":2000,"priority":"low","response_format":{"type":"regex","pattern":"[a-z ]{1000}[a-z ]{1000}[a-z ]{1000}[a-z ]{1000}[a-z ]{1000}"}}`)
	if resp.StatusCode != 202 || json.Unmarshal(body, &sub) != nil {
		t.Fatalf("submit the long job: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do(ctx, "POST", "/v1/jobs/"+sub.ID+"/cancel", "key-acme", ""); resp.StatusCode != 202 && resp.StatusCode != 200 {
		t.Fatalf("cancel: %d %s", resp.StatusCode, body)
	}
	if res = f.waitResult(ctx, sub.ID); res.Status != contracts.StatusCanceled {
		t.Fatalf("canceled job: %+v", res)
	}
	// The metrics saw the calls, by route and status.
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "zerolayer_gateway_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var route, code string
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" {
					route = l.GetValue()
				} else {
					code = l.GetValue()
				}
			}
			got[route+" "+code] = m.GetCounter().GetValue()
		}
	}
	if got["POST /v1/jobs 401"] != 2 || got["POST /v1/jobs 202"] != 2 || got["GET /v1/jobs/{id}/events 200"] < 3 {
		t.Fatalf("request metrics %v", got)
	}
}

// TestGatewayCompatible: OpenAI chat completions and Anthropic messages,
// plain and streamed, give the same greedy text as the job itself.
func TestGatewayCompatible(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	want := checkChatCompletion(t, f, ctx) // the job's text
	t.Run("openai stream", func(t *testing.T) { checkChatStream(t, f, ctx, want) })
	t.Run("openai logprobs", func(t *testing.T) { checkChatLogprobs(t, f, ctx, want) })
	t.Run("openai errors", func(t *testing.T) {
		if resp, body := f.do(ctx, "POST", "/v1/chat/completions", "key-acme", `{"model":"stories260k","messages":[{"role":"user","content":"hi"}],"n":2}`); resp.StatusCode != 400 || errorCode(t, body) != contracts.CodeInvalidRequest {
			t.Fatalf("n=2: %d %s", resp.StatusCode, body)
		}
		if resp, body := f.do(ctx, "POST", "/v1/chat/completions", "key-acme", `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 404 || errorCode(t, body) != contracts.CodeUnknownModel {
			t.Fatalf("unknown model: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("anthropic", func(t *testing.T) { checkMessages(t, f, ctx, want) })
}

// compatChat is the OpenAI chat request of TestGatewayCompatible, without
// its closing brace.
const compatChat = `{"model":"stories260k","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Once upon a time"}]}],"max_tokens":10,"temperature":0`

// checkChatCompletion checks a plain chat completion and returns its text.
func checkChatCompletion(t *testing.T, f *gatewayFixture, ctx context.Context) string {
	t.Helper()
	chat := compatChat
	resp, body := f.do(ctx, "POST", "/v1/chat/completions", "key-acme", chat+`}`)
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	var cc struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Message      struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal(body, &cc); err != nil {
		t.Fatal(err)
	}
	want := cc.Choices[0].Message.Content
	if cc.Object != "chat.completion" || cc.ID != resp.Header.Get(gateway.JobIDHeader) || want == "" || cc.Choices[0].Message.Role != "assistant" ||
		cc.Choices[0].FinishReason != "length" || cc.Usage.CompletionTokens != 10 || cc.Usage.TotalTokens != cc.Usage.PromptTokens+10 {
		t.Fatalf("chat completion %s", body)
	}
	return want
}

// checkChatStream: the streamed chunks give the plain text, the finish
// reason and the usage.
func checkChatStream(t *testing.T, f *gatewayFixture, ctx context.Context, want string) {
	resp, body := f.do(ctx, "POST", "/v1/chat/completions", "key-acme", compatChat+`,"stream":true,"stream_options":{"include_usage":true}}`)
	evs := parseSSE(t, body)
	if resp.StatusCode != 200 || len(evs) < 4 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("chat stream: %d %s", resp.StatusCode, body)
	}
	var streamed strings.Builder
	finish, usage := "", 0
	for _, e := range evs[:len(evs)-1] {
		var ch struct {
			Object  string
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(e.data), &ch); err != nil || ch.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %s: %v", e.data, err)
		}
		for _, c := range ch.Choices {
			streamed.WriteString(c.Delta.Content)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if ch.Usage != nil {
			usage = ch.Usage.CompletionTokens
		}
	}
	if streamed.String() != want || finish != "length" || usage != 10 {
		t.Fatalf("streamed %q (finish %q, usage %d), plain %q", streamed.String(), finish, usage, want)
	}
}

// checkChatLogprobs: log-probabilities, plain: one per generated token,
// with the alternatives asked for, and the same text.
func checkChatLogprobs(t *testing.T, f *gatewayFixture, ctx context.Context, want string) {
	resp, body := f.do(ctx, "POST", "/v1/chat/completions", "key-acme", compatChat+`,"logprobs":true,"top_logprobs":2}`)
	var lp struct {
		Choices []struct {
			Message  struct{ Content string }
			Logprobs struct {
				Content []struct {
					Token       string
					Logprob     float64
					Bytes       []int
					TopLogprobs []struct{ Logprob float64 } `json:"top_logprobs"`
				}
			}
		}
	}
	if err := json.Unmarshal(body, &lp); err != nil || resp.StatusCode != 200 || len(lp.Choices) != 1 {
		t.Fatalf("logprobs: %d %s", resp.StatusCode, body)
	}
	lpc := lp.Choices[0].Logprobs.Content
	if lp.Choices[0].Message.Content != want || len(lpc) != 10 {
		t.Fatalf("logprobs: text %q (want %q), %d entries\n%s", lp.Choices[0].Message.Content, want, len(lpc), body)
	}
	for i, c := range lpc {
		if c.Logprob > 0 || len(c.TopLogprobs) != 2 || c.TopLogprobs[0].Logprob < c.TopLogprobs[1].Logprob || len(c.Bytes) != len(c.Token) {
			t.Fatalf("logprob %d: %+v", i, c)
		}
	}
}

// checkMessages: Anthropic messages, with x-api-key, plain and streamed,
// give the chat's text.
func checkMessages(t *testing.T, f *gatewayFixture, ctx context.Context, want string) {
	msg := `{"model":"stories260k","system":"Be brief.","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":10,"temperature":0`
	resp, body := f.do(ctx, "POST", "/v1/messages", "", msg+`}`, "x-api-key", "key-acme")
	var m struct {
		Type, Role string
		Content    []struct{ Type, Text string }
		StopReason string `json:"stop_reason"`
		Usage      struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err := json.Unmarshal(body, &m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("messages: %d %s", resp.StatusCode, body)
	}
	if m.Type != "message" || m.Role != "assistant" || len(m.Content) != 1 || m.Content[0].Text != want || m.StopReason != "max_tokens" || m.Usage.OutputTokens != 10 || m.Usage.InputTokens == 0 {
		t.Fatalf("message %s (chat gave %q)", body, want)
	}
	resp, body = f.do(ctx, "POST", "/v1/messages", "", msg+`,"stream":true}`, "x-api-key", "key-acme")
	if resp.StatusCode != 200 {
		t.Fatalf("message stream: %d %s", resp.StatusCode, body)
	}
	evs := parseSSE(t, body)
	var names []string
	var streamed strings.Builder
	for _, e := range evs {
		names = append(names, e.name)
		var v struct {
			Type  string
			Delta struct {
				Text       string
				StopReason string `json:"stop_reason"`
			}
		}
		if err := json.Unmarshal([]byte(e.data), &v); err != nil || v.Type != e.name {
			t.Fatalf("event %+v: %v", e, err)
		}
		if e.name == "content_block_delta" {
			streamed.WriteString(v.Delta.Text)
		}
		if e.name == "message_delta" && v.Delta.StopReason != "max_tokens" {
			t.Fatalf("message_delta %s", e.data)
		}
	}
	got := strings.Join(names, " ")
	if !strings.HasPrefix(got, "message_start content_block_start content_block_delta") || !strings.HasSuffix(got, "content_block_stop message_delta message_stop") || streamed.String() != want {
		t.Fatalf("message stream: %s; text %q, want %q", got, streamed.String(), want)
	}
	if resp, body := f.do(ctx, "POST", "/v1/messages", "key-acme", `{"model":"stories260k","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 400 || !strings.Contains(string(body), `"max_tokens_out_of_range"`) {
		t.Fatalf("no max_tokens: %d %s", resp.StatusCode, body)
	}
}

// TestGatewayDroppedCallerCancels: a streaming caller that goes away after
// the first chunk leaves no job running on its behalf.
func TestGatewayDroppedCallerCancels(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/v1/chat/completions", strings.NewReader(
		`{"model":"stories260k","messages":[{"role":"user","content":"Tell a long story"}],"max_tokens":4000,"stream":true}`))
	req.Header.Set("Authorization", "Bearer key-acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get(gateway.JobIDHeader)
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("stream: %d, job %q", resp.StatusCode, id)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel() // the caller goes away
	resp.Body.Close()
	res := f.waitResult(context.Background(), id)
	if res.Status != contracts.StatusCanceled || res.Usage == nil || res.Usage.OutputTokens >= 4000 {
		t.Fatalf("abandoned job: status %s, usage %+v", res.Status, res.Usage)
	}
	t.Logf("canceled after %d tokens", res.Usage.OutputTokens)
}

// TestGatewayBatches: a JSONL batch posted to the gateway runs to the end;
// its state counts the lines, its output has one record per line in input
// order; the same id again is the same batch; another tenant sees nothing.
func TestGatewayBatches(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	var in strings.Builder
	for i := 0; i < 6; i++ {
		fmt.Fprintf(&in, `{"custom_id":"doc-%d","request":{"model":"stories260k","messages":[{"role":"user","content":"Once upon a time %d"}],"max_tokens":%d}}`+"\n", i, i, 4+i)
	}
	in.WriteString("not json\n")
	resp, body := f.do(ctx, "POST", "/v1/batches?id=nightly-1", "key-acme", in.String())
	if resp.StatusCode != 202 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do(ctx, "GET", "/v1/zl/batches/nightly-1/output", "key-acme", ""); resp.StatusCode != 400 && resp.StatusCode != 200 {
		t.Fatalf("output before the end: %d %s", resp.StatusCode, body)
	}
	st := f.waitBatch(ctx, "nightly-1")
	if st.Error != "" || st.Counts != (producer.BatchCounts{Total: 7, Completed: 6, Invalid: 1}) {
		t.Fatalf("ended batch %+v", st)
	}
	resp, body = f.do(ctx, "GET", "/v1/zl/batches/nightly-1/output", "key-acme", "")
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if resp.StatusCode != 200 || len(lines) != 7 {
		t.Fatalf("output: %d, %d lines\n%s", resp.StatusCode, len(lines), body)
	}
	for i, l := range lines[:6] {
		var rec producer.BatchRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.CustomID != fmt.Sprintf("doc-%d", i) || rec.Result == nil ||
			rec.Result.Status != contracts.StatusCompleted || rec.Result.Usage.OutputTokens != 4+i {
			t.Fatalf("output line %d: %s (%v)", i, l, err)
		}
	}
	// The same id again: the same batch, nothing new.
	if resp, body := f.do(ctx, "POST", "/v1/batches?id=nightly-1", "key-acme", in.String()); resp.StatusCode != 200 || !strings.Contains(string(body), `"ended"`) {
		t.Fatalf("create again: %d %s", resp.StatusCode, body)
	}
	for _, path := range []string{"/v1/zl/batches/nightly-1", "/v1/zl/batches/nightly-1/output"} {
		if resp, _ := f.do(ctx, "GET", path, "key-globex", ""); resp.StatusCode != 404 {
			t.Fatalf("another tenant's %s: %d", path, resp.StatusCode)
		}
	}
	if resp, body := f.do(ctx, "POST", "/v1/zl/batches?id=bad/id", "key-acme", in.String()); resp.StatusCode != 400 {
		t.Fatalf("bad id: %d %s", resp.StatusCode, body)
	}
}

// TestGatewayBatchResume: a batch whose gateway stops mid-run stays
// in_progress; the next gateway to start resumes it to the end, and no job runs
// twice.
func TestGatewayBatchResume(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 2}), "w1")
	cfg := gateway.Config{Keys: plainKeys(t, "key-acme", "acme"), Models: map[string]string{workertest.ModelName: modeltest.StoriesPath(t)}, Logger: workertest.Logger(t)}
	serve := func() (*gateway.Gateway, *gatewayFixture) {
		gw, err := gateway.New(b.Srv.Conn, cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		return gw, &gatewayFixture{t: t, url: srv.URL}
	}
	ctx := context.Background()
	var in strings.Builder
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&in, `{"custom_id":"doc-%d","request":{"model":"stories260k","messages":[{"role":"user","content":"Tell a long story %d"}],"max_tokens":300}}`+"\n", i, i)
	}
	gw1, f1 := serve()
	if resp, body := f1.do(ctx, "POST", "/v1/zl/batches?id=b-resume", "key-acme", in.String()); resp.StatusCode != 202 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	gw1.Close() // the gateway stops mid-run
	var st gateway.BatchState
	_, body := f1.do(ctx, "GET", "/v1/zl/batches/b-resume", "key-acme", "")
	json.Unmarshal(body, &st)
	if st.Status != "in_progress" {
		t.Fatalf("after its gateway stopped: %s", body)
	}
	// The next gateway resumes it on its own; an explicit resume of a
	// running batch changes nothing.
	gw2, f2 := serve()
	defer gw2.Close()
	if resp, body := f2.do(ctx, "POST", "/v1/zl/batches/b-resume/resume", "key-acme", ""); resp.StatusCode != 202 && resp.StatusCode != 200 {
		t.Fatalf("resume: %d %s", resp.StatusCode, body)
	}
	st = f2.waitBatch(ctx, "b-resume")
	if st.Error != "" || st.Counts.Completed != 8 {
		t.Fatalf("resumed batch %+v", st)
	}
	b.WaitDrained(t)
	if n := len(workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))); n != 8 {
		t.Fatalf("%d usage records for 8 jobs", n)
	}
}

// batchTakeoverLines is the size of the batches run across a takeover:
// enough that the first gateway dies well before the end however fast the
// worker is (at 64, a fast worker had answered them all by the first
// poll), and 64 under the race detector, where the worker is several times
// slower and 256 would not end within waitBatch's minute.
var batchTakeoverLines = map[bool]int{false: 256, true: 64}[raceOn]

// takeoverHeld is how many lines the worker of batchAcrossTakeover answers
// before the first gateway dies.
const takeoverHeld = 8

// heldExecutor runs the jobs of a batch's first free lines (custom ids
// doc-0 … doc-<free-1>) and holds every other until open is closed. It
// holds by line, not by arrival: a batch's records are written in line
// order, so a held early line would hold every count back.
type heldExecutor struct {
	*worker.SchedExecutor // its other methods (models, admission) too
	free                  int
	open                  chan struct{}
}

func (h *heldExecutor) Execute(ctx context.Context, job *worker.Job, sink worker.Sink) (*worker.Outcome, error) {
	var n int
	if _, err := fmt.Sscanf(job.ID[strings.LastIndex(job.ID, "-doc-")+len("-doc-"):], "%d", &n); err != nil || n >= h.free {
		select {
		case <-h.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.SchedExecutor.Execute(ctx, job, sink)
}

// batchAcrossTakeover runs batch id of batchTakeoverLines long jobs on the
// first of two gateway replicas, which dies (its NATS connection drops:
// it neither finishes nor gives up its lease) once 4 lines are done; the
// other takes the batch over once the lease runs out, with no call to
// resume. watch, if set, is called before the batch is made. It returns
// the counts the batch showed when its gateway died and the state it
// ended with.
func batchAcrossTakeover(t *testing.T, id string, watch func(b *workertest.Bundle)) (b *workertest.Bundle, died producer.BatchCounts, ended gateway.BatchState) {
	t.Helper()
	b = workertest.Setup(t, contracts.StreamsConfig{})
	// The worker answers takeoverHeld lines, then waits until the first
	// gateway has died: however fast it is, the batch is mid-run then.
	gate := &heldExecutor{SchedExecutor: workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 1}), free: takeoverHeld, open: make(chan struct{})}
	// Every line it has fetched is in hand at once (Concurrency), so the
	// held ones cannot keep the free ones from running.
	b.StartWorkerConfig(t, gate, worker.Config{ID: "w1", Concurrency: batchTakeoverLines})
	cfg := gateway.Config{Keys: plainKeys(t, "key-acme", "acme"), Models: map[string]string{workertest.ModelName: modeltest.StoriesPath(t)},
		Logger: workertest.Logger(t), BatchLease: time.Second}
	serve := func(nc *nats.Conn) *gatewayFixture {
		gw, err := gateway.New(nc, cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(func() { srv.Close(); gw.Close() })
		return &gatewayFixture{t: t, url: srv.URL}
	}
	nc1, _ := b.Srv.Connect(t)
	f1, f2 := serve(nc1), serve(b.Srv.Conn)
	if watch != nil {
		watch(b)
	}
	ctx := context.Background()
	var in strings.Builder
	for i := 0; i < batchTakeoverLines; i++ {
		fmt.Fprintf(&in, `{"custom_id":"doc-%d","request":{"model":"stories260k","messages":[{"role":"user","content":"Tell a long story %d"}],"max_tokens":300}}`+"\n", i, i)
	}
	if resp, body := f1.do(ctx, "POST", "/v1/zl/batches?id="+id, "key-acme", in.String()); resp.StatusCode != 202 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	var st gateway.BatchState
	natstest.Until(t, 30*time.Second, "the batch under way", func() bool {
		_, body := f1.do(ctx, "GET", "/v1/zl/batches/"+id, "key-acme", "")
		json.Unmarshal(body, &st)
		return st.Counts.Completed >= 4
	})
	nc1.Close() // the first gateway dies
	close(gate.open)
	if st.Counts.Completed >= batchTakeoverLines-8 {
		t.Fatalf("the batch was nearly done before its gateway died: %+v", st.Counts)
	}
	ended = f2.waitBatch(ctx, id)
	if ended.Error != "" || ended.Counts.Completed != batchTakeoverLines {
		t.Fatalf("batch after its gateway died: %+v", ended)
	}
	return b, st.Counts, ended
}

// TestGatewayBatchTakeover: of two gateway replicas, the one running a
// batch dies mid-run; the other takes the batch over once the lease runs
// out, with no call to resume, and every line is answered and billed once.
func TestGatewayBatchTakeover(t *testing.T) {
	t.Parallel()
	b, _, _ := batchAcrossTakeover(t, "b-takeover", nil)
	b.WaitDrained(t)
	if n := len(workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))); n != batchTakeoverLines {
		t.Fatalf("%d usage records for %d jobs", n, batchTakeoverLines)
	}
}

// TestGatewayBatchCountsNeverGoBack: a batch's request counts never go
// down as a client sees them, across a takeover. The gateway that takes a
// batch over walks its input from the first line again, answering the
// lines already done from their results, so its own counts start at zero
// (an OpenAI batch's completed went 1,257, then 1, then 1,706). Every
// state the batch is written with, watched in ZL_BATCH_STATES, counts at
// least what the one before counted.
func TestGatewayBatchCountsNeverGoBack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var watch jetstream.KeyWatcher
	_, died, _ := batchAcrossTakeover(t, "b-counts", func(b *workertest.Bundle) {
		kv, err := b.Srv.JS.KeyValue(ctx, gateway.BatchStates)
		if err != nil {
			t.Fatal(err)
		}
		if watch, err = kv.Watch(ctx, "acme.b-counts", jetstream.UpdatesOnly()); err != nil {
			t.Fatal(err)
		}
	})
	defer watch.Stop()
	var last producer.BatchCounts
	timeout := time.After(30 * time.Second)
	for ended := false; !ended; {
		var e jetstream.KeyValueEntry
		select {
		case e = <-watch.Updates():
		case <-timeout:
			t.Fatalf("the batch's states up to its end: not within 30s (last %+v)", last)
		}
		var st gateway.BatchState
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			t.Fatal(err)
		}
		c := st.Counts
		if c.Total < last.Total || c.Completed < last.Completed || c.Failed < last.Failed || c.Canceled < last.Canceled || c.Invalid < last.Invalid {
			t.Fatalf("request counts went back from %+v to %+v (revision %d)", last, c, e.Revision())
		}
		last, ended = c, st.Status == "ended"
	}
	t.Logf("its gateway died at %+v; ended at %+v", died, last)
}

// TestGatewayBatchOutlastsTheReadTimeout: a batch's input is read as its
// lines are answered, which can take longer than the JetStream API timeout
// (5 s) after which the object store's reader gives up ("nats: timeout":
// a 10,000-line batch stopped at line 2,354). No worker runs for the
// first 6 s, so the lines past RunBatch's window of 256 are read after
// that; the batch still runs to its end.
func TestGatewayBatchOutlastsTheReadTimeout(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	cfg := gateway.Config{Keys: plainKeys(t, "key-acme", "acme"), Models: map[string]string{workertest.ModelName: modeltest.StoriesPath(t)}, Logger: workertest.Logger(t)}
	gw, err := gateway.New(b.Srv.Conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(gw)
	defer srv.Close()
	f := &gatewayFixture{t: t, url: srv.URL}
	ctx := context.Background()
	const n = 300
	var in strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, `{"custom_id":"doc-%d","request":{"model":"stories260k","messages":[{"role":"user","content":"Once upon a time there was a little cat, number %d"}],"max_tokens":2}}`+"\n", i, i)
	}
	if resp, body := f.do(ctx, "POST", "/v1/zl/batches?id=slow-read", "key-acme", in.String()); resp.StatusCode != 202 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	time.Sleep(6 * time.Second)
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	if st := f.waitBatch(ctx, "slow-read"); st.Error != "" || st.Counts.Completed != n {
		t.Fatalf("batch %+v", st)
	}
}

// TestGatewayBatchCancel: canceling a running batch ends it with its jobs
// canceled (billed for what ran) and its output written.
func TestGatewayBatchCancel(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	var in strings.Builder
	for i := 0; i < 6; i++ {
		fmt.Fprintf(&in, `{"custom_id":"doc-%d","request":{"model":"stories260k","messages":[{"role":"user","content":"Tell a long story %d"}],"max_tokens":400,"priority":"low"}}`+"\n", i, i)
	}
	if resp, body := f.do(ctx, "POST", "/v1/zl/batches?id=to-cancel", "key-acme", in.String()); resp.StatusCode != 202 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do(ctx, "POST", "/v1/zl/batches/to-cancel/cancel", "key-acme", ""); resp.StatusCode != 202 && resp.StatusCode != 200 {
		t.Fatalf("cancel: %d %s", resp.StatusCode, body)
	}
	st := f.waitBatch(ctx, "to-cancel")
	if st.Counts.Total != 6 || st.Counts.Canceled == 0 || st.Counts.Completed+st.Counts.Canceled != 6 {
		t.Fatalf("canceled batch %+v", st)
	}
	if resp, body := f.do(ctx, "GET", "/v1/zl/batches/to-cancel/output", "key-acme", ""); resp.StatusCode != 200 || strings.Count(string(body), "\n") != 6 {
		t.Fatalf("output of a canceled batch: %d %s", resp.StatusCode, body)
	}
	t.Logf("%d canceled, %d completed before the cancel", st.Counts.Canceled, st.Counts.Completed)
}

// TestGatewayLogsNoSecrets: a gateway on a key file, in front of a real
// worker, serves a right key, refuses a wrong secret, a key of no known
// form and a revoked key, and its logs name the refused key by its id but
// hold no key, no secret and no prompt.
func TestGatewayLogsNoSecrets(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	path := filepath.Join(t.TempDir(), "keys")
	key, e := newKey(t, path, "acme")
	secret := strings.TrimPrefix(key, e.ID+"_")
	var logs natstest.LogBuffer
	keys, err := gateway.NewKeyring(gateway.KeyringConfig{File: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(b.Srv.Conn, gateway.Config{Keys: keys, Models: map[string]string{workertest.ModelName: modeltest.StoriesPath(t)},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() { srv.Close(); gw.Close() })
	f := &gatewayFixture{t: t, url: srv.URL}
	ctx := context.Background()

	const marker = "Zanzibar-quokka-7731"
	chat := `{"model":"stories260k","messages":[{"role":"user","content":"Once upon a time ` + marker + `"}],"max_tokens":4}`
	if resp, body := f.do(ctx, "POST", "/v1/chat/completions", key, chat); resp.StatusCode != 200 {
		t.Fatalf("the right key: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do(ctx, "POST", "/v1/jobs", key, chat); resp.StatusCode != 202 {
		t.Fatalf("the right key, a job: %d %s", resp.StatusCode, body)
	}
	wrongSecret := e.ID + "_" + strings.Repeat("q", len(secret))
	garbage := "sk-not-ours-" + marker
	for _, k := range []string{wrongSecret, garbage, secret} {
		if resp, body := f.do(ctx, "POST", "/v1/chat/completions", k, chat); resp.StatusCode != 401 || errorCode(t, body) != contracts.CodeUnauthenticated {
			t.Fatalf("a wrong key: %d %s", resp.StatusCode, body)
		}
	}
	if _, err := gateway.RevokeKeyFile(path, e.ID); err != nil {
		t.Fatal(err)
	}
	if resp, body := f.do(ctx, "POST", "/v1/chat/completions", key, chat, "x-api-key", key); resp.StatusCode != 401 {
		t.Fatalf("a revoked key, without a restart: %d %s", resp.StatusCode, body)
	}
	b.WaitDrained(t)

	out := logs.String()
	for _, s := range []string{key, secret, marker, garbage, "Once upon a time"} {
		if strings.Contains(out, s) {
			t.Errorf("the logs hold %q:\n%s", s, out)
		}
	}
	// The logger is wired: refusals name the key id, the revoke is seen.
	if !strings.Contains(out, "key_id="+e.ID) || !strings.Contains(out, "key file reread") {
		t.Errorf("logs:\n%s", out)
	}
}

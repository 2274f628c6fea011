package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/ops/devstack/devstacktest"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// tokenCounter opens the tokenizer of the model file at path and returns
// a counter of its tokens (no BOS).
func tokenCounter(t *testing.T, path string) func(string) int {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return func(s string) int { return len(tok.Encode(s, tokenizer.EncodeOptions{})) }
}

// TestGenerateDocuments: the same seed gives the same documents, another
// seed others, and every document's length in the tokenizer's tokens is
// in the range, on stories260K's 512-token vocabulary and on the
// generated 134M model's (SentencePiece, 32000 tokens, most English words
// spelled in byte tokens).
func TestGenerateDocuments(t *testing.T) {
	t.Parallel()
	c := synth.Tiny(gpu.Q8_0)
	c.Vocab = synth.Bench134M(gpu.Q8_0).Vocab
	synthPath := filepath.Join(t.TempDir(), "vocab32000.gguf")
	if err := synth.WriteFile(synthPath, c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		count    func(string) int
		min, max int
	}{
		{"stories260K", tokenCounter(t, modeltest.StoriesPath(t)), 1000, 4000},
		{"stories260K narrow", tokenCounter(t, modeltest.StoriesPath(t)), 300, 310},
		{"synth 134M vocab", tokenCounter(t, synthPath), 1000, 2000},
		{"synth 134M vocab exact", tokenCounter(t, synthPath), 200, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := GenerateDocuments(12, tc.min, tc.max, 7, tc.count)
			if err != nil {
				t.Fatal(err)
			}
			again, err := GenerateDocuments(12, tc.min, tc.max, 7, tc.count)
			if err != nil {
				t.Fatal(err)
			}
			other, err := GenerateDocuments(12, tc.min, tc.max, 8, tc.count)
			if err != nil {
				t.Fatal(err)
			}
			lengths := map[int]bool{}
			for i, d := range docs {
				if d != again[i] {
					t.Errorf("document %d differs between two runs of one seed", i)
				}
				if d.Text == other[i].Text {
					t.Errorf("document %d is the same for seeds 7 and 8", i)
				}
				if d.Index != i || d.Tokens < tc.min || d.Tokens > tc.max || d.Tokens != tc.count(d.Text) {
					t.Errorf("document %d: index %d, %d tokens (counted again %d), want %d-%d", i, d.Index, d.Tokens, tc.count(d.Text), tc.min, tc.max)
				}
				lengths[d.Tokens] = true
			}
			if tc.max-tc.min >= 1000 && len(lengths) < 6 {
				t.Errorf("lengths %v: want them spread over %d-%d", lengths, tc.min, tc.max)
			}
		})
	}
	for _, bad := range [][3]int{{0, 10, 20}, {3, 0, 20}, {3, 30, 20}} {
		if _, err := GenerateDocuments(bad[0], bad[1], bad[2], 1, func(s string) int { return len(s) }); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestDocumentRequest: every document's request carries the same
// instruction first, its own document, the schema as a strict
// json_schema response format, and asks for the usage of a stream.
func TestDocumentRequest(t *testing.T) {
	t.Parallel()
	docs, err := GenerateDocuments(3, 50, 80, 1, func(s string) int { return len(strings.Fields(s)) })
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		body, err := documentRequest("m", DocumentInstruction, d, 256)
		if err != nil {
			t.Fatal(err)
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role, Content string
			} `json:"messages"`
			ResponseFormat struct {
				Type       string `json:"type"`
				JSONSchema struct {
					Name   string          `json:"name"`
					Strict bool            `json:"strict"`
					Schema json.RawMessage `json:"schema"`
				} `json:"json_schema"`
			} `json:"response_format"`
			MaxTokens     int              `json:"max_tokens"`
			Temperature   *float64         `json:"temperature"`
			Stream        bool             `json:"stream"`
			StreamOptions map[string]bool  `json:"stream_options"`
			Extra         *json.RawMessage `json:"ignore_eos"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		rf := req.ResponseFormat
		if req.Model != "m" || len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[0].Content != DocumentInstruction ||
			req.Messages[1].Role != "user" || req.Messages[1].Content != d.Text ||
			rf.Type != "json_schema" || rf.JSONSchema.Name == "" || !rf.JSONSchema.Strict || string(rf.JSONSchema.Schema) != DocumentSchema ||
			req.MaxTokens != 256 || req.Temperature == nil || *req.Temperature != 0 || !req.Stream || !req.StreamOptions["include_usage"] || req.Extra != nil {
			t.Errorf("request of document %d: %s", d.Index, body)
		}
	}
	// The schema is one the gateway takes.
	req := contracts.JobRequest{Model: "m", MaxTokens: 8, Messages: []contracts.Message{{Role: "user", Content: "x"}},
		ResponseFormat: &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(DocumentSchema)}}
	if err := req.Validate(contracts.Limits{}); err != nil {
		t.Errorf("schema refused: %v", err)
	}
}

func TestValidAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		answer string
		want   bool
	}{
		{`{"title":"Annual water report","category":"report","pages":12}`, true},
		{` {"category":"story","pages":99,"title":""} `, true},
		{`{"title":"` + strings.Repeat("é", 40) + `","category":"letter","pages":1}`, true},
		{`{"title":"` + strings.Repeat("x", 41) + `","category":"letter","pages":1}`, false},
		{`{"title":"a","category":"poem","pages":1}`, false},
		{`{"title":"a","category":"manual","pages":0}`, false},
		{`{"title":"a","category":"manual","pages":100}`, false},
		{`{"title":"a","category":"manual"}`, false},
		{`{"title":"a","category":"manual","pages":3,"extra":1}`, false},
		{`{"title":"a","category":"manual","pages":3}{}`, false},
		{`{"title":"a","category":"manual","pa`, false},
	} {
		if got := validAnswer(tc.answer); got != tc.want {
			t.Errorf("validAnswer(%s) = %v, want %v", tc.answer, got, tc.want)
		}
	}
}

func TestErrorCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"error":{"message":"no room","type":"server_error","code":"kv_exhausted"}}`, 503, "kv_exhausted"},
		{`{"error":{"code":400,"message":"too long","type":"exceed_context_size_error"}}`, 400, "exceed_context_size_error"},
		{`{"error":{"code":500,"message":"x"}}`, 500, "http_500"},
		{`not json`, 502, "http_502"},
	} {
		if got := errorCode([]byte(tc.body), tc.status); got != tc.want {
			t.Errorf("errorCode(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

// TestSummarizeDocuments checks the report's arithmetic on made-up runs:
// four documents over two seconds, one failed.
func TestSummarizeDocuments(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	runs := []docRun{
		{start: at(0), first: at(100), end: at(1000), jobID: "a", prompt: 1000, cached: 0, output: 20, content: `{"title":"t","category":"report","pages":2}`},
		{start: at(0), first: at(300), end: at(1500), jobID: "b", prompt: 2000, cached: 900, output: 30, content: `{"title":"t","category":"novel","pages":2}`},
		{start: at(1000), end: at(2000), jobID: "c", prompt: 1500, cached: 900, output: 10, content: ``},
		{start: at(1500), end: at(1600), code: "kv_exhausted"},
	}
	records := map[string]contracts.Usage{
		"a": {MemoryAllocatedMB: 100, SharedMemoryMB: 0, Preemptions: 1, RecomputedTokens: 500},
		"b": {MemoryAllocatedMB: 50, SharedMemoryMB: 40},
		"x": {MemoryAllocatedMB: 1000}, // not one of the runs
	}
	row := summarizeDocuments("stack", 2, runs, 2*time.Second, records)
	want := DocumentsRow{Path: "stack", Concurrency: 2, Docs: 4, OK: 3, Valid: 1, Failures: map[string]int{"kv_exhausted": 1}, Seconds: 2,
		PromptTokens: 4500, CachedTokens: 1800, OutputTokens: 60,
		DocsPerHour: 3 * 3600 / 2, PromptPerS: 2250, OutputPerS: 30,
		// TTFT 100, 300, 1000 (no content: the end); per document 1000,
		// 1500, 1000. p50 is the middle one, p99 the last.
		TTFTP50: 300, TTFTP99: 1000, DocP50: 1000, DocP99: 1500,
		Usage: 2, KVMBPerDoc: 75, SharedKVMBPerDoc: 20, PreemptionsPerDoc: 0.5, RecomputedPerDoc: 250}
	if fmt.Sprint(row) != fmt.Sprint(want) {
		t.Errorf("row\n %+v\nwant\n %+v", row, want)
	}
	if p := summarizeDocuments("peer", 2, runs[3:], time.Second, nil); p.OK != 0 || p.DocsPerHour != 0 || p.TTFTP50 != 0 || p.Usage != 0 {
		t.Errorf("all failed: %+v", p)
	}

	peer := summarizeDocuments("peer", 2, runs[:2], 4*time.Second, nil)
	res := &DocumentsResults{Rows: []DocumentsRow{row, peer}}
	if r := res.PeerRatios(); len(r) != 1 || math.Abs(r[2]-3) > 1e-9 { // 5400 ÷ 1800 documents an hour
		t.Errorf("ratios %v", r)
	}
	var out bytes.Buffer
	if err := res.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"docs/h", "failures, stack at 2 clients: kv_exhausted ×1", "stack ÷ peer documents/hour: 2 clients 3.00"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table without %q:\n%s", s, out.String())
		}
	}
	out.Reset()
	if err := res.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Rows   []DocumentsRow     `json:"rows"`
		Ratios map[string]float64 `json:"stack_over_peer_docs_per_hour"`
		TTFT   string             `json:"ttft"`
	}
	if err := json.Unmarshal(out.Bytes(), &js); err != nil || len(js.Rows) != 2 || js.Rows[0].DocsPerHour != 5400 || js.Ratios["2"] != 3 || !strings.HasPrefix(js.TTFT, "streamed") {
		t.Errorf("json (%v):\n%s", err, out.String())
	}
}

// TestStreamDocument reads llama-server's stream shape (the usage in the
// last chunk with the finish reason, the cached part only in timings) and
// an error in the stream.
func TestStreamDocument(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("fail")) {
			fmt.Fprint(w, `data: {"error":{"code":500,"message":"boom","type":"server_error"}}`+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"{\"title\":\"a\","}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"\"category\":\"story\",\"pages\":3}"}}]}`,
			`{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"usage":{"completion_tokens":12,"prompt_tokens":1100,"total_tokens":1112},"timings":{"prompt_n":200}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	r := streamDocument(context.Background(), srv.Client(), addr, Tenant, []byte(`{}`))
	if r.err != nil || r.code != "" || r.prompt != 1100 || r.cached != 900 || r.output != 12 || r.finish != "stop" || !validAnswer(r.content) ||
		r.first.IsZero() || r.end.Before(r.first) {
		t.Errorf("run %+v", r)
	}
	if r := streamDocument(context.Background(), srv.Client(), addr, Tenant, []byte(`fail`)); r.code != "server_error" || r.err == nil {
		t.Errorf("failed run %+v", r)
	}
}

// TestDocuments runs the benchmark on a dev stack serving stories260K,
// with the stack's own gateway as the peer (the peer's path, its own
// client and rows).
func TestDocuments(t *testing.T) {
	t.Parallel()
	st := devstacktest.Start(t, devstack.Config{HTTPAddr: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := Documents(ctx, st, DocumentsConfig{Docs: 3, MinTokens: 20, MaxTokens: 60, Concurrency: []int{2}, AnswerTokens: 96, Peer: st.GatewayAddr()}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", out.String())
	if len(res.Rows) != 2 || res.Rows[0].Path != "stack" || res.Rows[1].Path != "peer" || res.Context != 2048 || res.InstructionTokens <= 0 ||
		res.DocTokens < 20 || res.DocTokens > 60 {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res.Rows {
		if r.Concurrency != 2 || r.Docs != 3 || r.OK != 3 || len(r.Failures) != 0 || r.PromptTokens <= 3*res.InstructionTokens ||
			r.OutputTokens <= 0 || r.DocsPerHour <= 0 || r.PromptPerS <= 0 || r.TTFTP50 <= 0 || r.TTFTP99 < r.TTFTP50 || r.DocP99 < r.DocP50 {
			t.Errorf("row %+v", r)
		}
	}
	if s := res.Rows[0]; s.Usage != 3 || s.KVMBPerDoc <= 0 || s.PreemptionsPerDoc != 0 {
		t.Errorf("stack row without the usage records: %+v", s)
	}
	if !strings.Contains(out.String(), "stack ÷ peer documents/hour: 2 clients ") {
		t.Errorf("report:\n%s", out.String())
	}
	if _, err := Documents(ctx, st, DocumentsConfig{Docs: 1, MinTokens: 2000, MaxTokens: 3000}, io.Discard); err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("documents past the context: %v", err)
	}
}

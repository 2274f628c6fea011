package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// DocumentInstruction is the system message of every request of the
// documents benchmark: the same text first in every prompt, so that a
// server's prefix cache can serve it after the first document.
const DocumentInstruction = `You are a careful archivist. You receive one document at a time, taken from a large collection of reports, letters, manuals and stories that were scanned and converted to plain text. Read the whole document before you answer. Then describe it with a single JSON object and nothing else: no greeting, no explanation, no code fence.

The object has exactly three fields. "title" is a short title for the document in your own words, at most forty characters, without quotation marks. "category" is one of "report", "letter", "manual" or "story": choose report for documents that present facts, figures or results; letter for documents addressed to a person or an office; manual for documents that explain how to do or use something; story for narrative text. "pages" is your estimate of how many printed pages the document would fill, a whole number from 1 to 99, counting about five hundred words to a page.

If the document is damaged, repetitive or hard to follow, still answer with your best guess for every field. Never leave a field out and never add another one.`

// DocumentSchema is the JSON Schema of the answer: every field bounded
// (a title of at most 40 characters, one of four categories, a page count
// of 1–99), so that a constrained model of random weights ends its answer
// too.
const DocumentSchema = `{"type":"object","properties":{"title":{"type":"string","maxLength":40},"category":{"type":"string","enum":["report","letter","manual","story"]},"pages":{"type":"integer","minimum":1,"maximum":99}},"required":["title","category","pages"],"additionalProperties":false}`

// DocumentsConfig configures Documents.
type DocumentsConfig struct {
	// Docs is the number of documents, all of them sent at every level.
	// Defaults to 200.
	Docs int
	// MinTokens and MaxTokens bound each document's length in the model's
	// tokens (the document alone: the instruction and the chat template
	// come on top). Default to 1000 and 4000.
	MinTokens, MaxTokens int
	// Concurrency lists the numbers of clients, one level each, in order.
	// Defaults to 8.
	Concurrency []int
	// AnswerTokens is each request's max_tokens. The schema ends the
	// answer well before it unless the tokenizer spells the JSON byte by
	// byte. Defaults to 256.
	AnswerTokens int
	// Seed picks the documents. Defaults to 1.
	Seed uint64
	// Instruction is the system message of every request. Defaults to
	// DocumentInstruction.
	Instruction string
	// Peer is the host:port of another OpenAI-compatible server (such as
	// llama-server on the same GGUF file, started with -np at least the
	// largest level) to send the same documents, in the same order and at
	// the same concurrency, right after the stack at each level; "" for
	// none.
	Peer string
	// Progress, if set, gets a line as each level and path starts.
	Progress io.Writer
}

// WithDefaults returns c with zero fields set to their defaults.
func (c DocumentsConfig) WithDefaults() DocumentsConfig {
	if c.Docs == 0 {
		c.Docs = 200
	}
	if c.MinTokens == 0 && c.MaxTokens == 0 {
		c.MinTokens, c.MaxTokens = 1000, 4000
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{8}
	}
	if c.AnswerTokens == 0 {
		c.AnswerTokens = 256
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Instruction == "" {
		c.Instruction = DocumentInstruction
	}
	return c
}

func (c DocumentsConfig) validate() error {
	for _, n := range c.Concurrency {
		if n <= 0 {
			return fmt.Errorf("bench: documents concurrency %d: want 1 or more clients per level", n)
		}
	}
	switch {
	case c.Docs < 0:
		return fmt.Errorf("bench: %d documents: want 1 or more (0: 200)", c.Docs)
	case c.MinTokens <= 0 || c.MaxTokens < c.MinTokens:
		return fmt.Errorf("bench: document tokens %d-%d: want 1 ≤ MIN ≤ MAX (e.g. 1000-4000)", c.MinTokens, c.MaxTokens)
	case c.AnswerTokens < 0:
		return fmt.Errorf("bench: answer tokens %d: want 1 or more (0: 256)", c.AnswerTokens)
	}
	return nil
}

// DocumentsResults are the measurements of Documents: a row per level
// and path, the stack's first.
type DocumentsResults struct {
	// CPU names the machine's processor.
	CPU string `json:"cpu"`
	// Model is the model the stack serves, Context its context length.
	Model   string `json:"model"`
	Context int    `json:"context"`
	// Docs, MinTokens, MaxTokens, Seed and AnswerTokens are the workload.
	Docs         int    `json:"docs"`
	MinTokens    int    `json:"doc_tokens_min"`
	MaxTokens    int    `json:"doc_tokens_max"`
	Seed         uint64 `json:"seed"`
	AnswerTokens int    `json:"max_tokens"`
	// DocTokens is the documents' mean length in the model's tokens, and
	// InstructionTokens the shared system message's.
	DocTokens         float64 `json:"doc_tokens_mean"`
	InstructionTokens int     `json:"instruction_tokens"`
	// Peer is the other server's address, "" without one.
	Peer string         `json:"peer,omitempty"`
	Rows []DocumentsRow `json:"rows"`
}

// DocumentsRow is every document through one path at one level.
type DocumentsRow struct {
	// Path is "stack" (the dev stack's HTTP gateway) or "peer".
	Path        string `json:"path"`
	Concurrency int    `json:"concurrency"`
	Docs        int    `json:"docs"`
	// OK counts the documents answered; Valid the answers that parse as
	// JSON and keep to the schema's bounds; Failures the others by error
	// code (the server's, or http_<status>, or transport).
	OK       int            `json:"ok"`
	Valid    int            `json:"valid"`
	Failures map[string]int `json:"failures,omitempty"`
	// Seconds is the level's wall time, all documents included.
	Seconds float64 `json:"seconds"`
	// PromptTokens, CachedTokens and OutputTokens sum the usage of the
	// documents answered (cached: prompt tokens served from the prefix
	// cache, from usage.prompt_tokens_details.cached_tokens, or
	// llama-server's prompt tokens less its timings.prompt_n).
	PromptTokens int `json:"prompt_tokens"`
	CachedTokens int `json:"cached_tokens"`
	OutputTokens int `json:"output_tokens"`
	// DocsPerHour, PromptPerS and OutputPerS are the answered documents
	// and their tokens over Seconds.
	DocsPerHour float64 `json:"docs_per_hour"`
	PromptPerS  float64 `json:"prompt_tokens_per_s"`
	OutputPerS  float64 `json:"output_tokens_per_s"`
	// TTFT is request sent to first content chunk of the stream, Doc
	// request sent to the end of the stream, in milliseconds.
	TTFTP50 float64 `json:"ttft_ms_p50"`
	TTFTP99 float64 `json:"ttft_ms_p99"`
	DocP50  float64 `json:"doc_ms_p50"`
	DocP99  float64 `json:"doc_ms_p99"`
	// The stack's rows only, from the jobs' usage records (Usage counts
	// those found): KV cache the job computed itself and KV it shared
	// from another job's prefix, in MiB (their peaks), preemptions and
	// tokens recomputed after a preemption, each per document.
	Usage             int     `json:"usage_records,omitempty"`
	KVMBPerDoc        float64 `json:"kv_mb_per_doc,omitempty"`
	SharedKVMBPerDoc  float64 `json:"shared_kv_mb_per_doc,omitempty"`
	PreemptionsPerDoc float64 `json:"preemptions_per_doc,omitempty"`
	RecomputedPerDoc  float64 `json:"recomputed_tokens_per_doc,omitempty"`
}

// docRun is what one document's request measured.
type docRun struct {
	start, first, end time.Time
	// jobID is the stack's job (the gateway's X-Zerolayer-Job-Id header).
	jobID                  string
	prompt, cached, output int
	content, finish        string
	// code is the failure's error code, "" when answered; err the failure.
	code string
	err  error
}

// Documents runs a document workload through st, which must serve the
// HTTP gateway (devstack.Config.HTTPAddr): cfg.Docs synthetic documents
// of cfg.MinTokens–cfg.MaxTokens tokens of the stack's model, each a
// streamed chat completion with the shared system message
// cfg.Instruction and the answer constrained to DocumentSchema
// (response_format json_schema, strict), temperature 0, as tenant Tenant.
// At each level of cfg.Concurrency that many clients send the documents
// in order, each client its next as its last ends; then, with cfg.Peer,
// the same to the peer. A failed document is counted by its error code
// and the run goes on. It writes a table of documents per hour, prompt
// and output tokens per second, time to first token and per document,
// KV memory, preemptions and recomputed tokens per document to w, then
// the stack's documents per hour over the peer's.
func Documents(ctx context.Context, st *devstack.Stack, cfg DocumentsConfig, w io.Writer) (*DocumentsResults, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	addr, err := gatewayAddr(st)
	if err != nil {
		return nil, err
	}
	name := st.Models().Names()[0]
	res := &DocumentsResults{CPU: cpuModel(), Model: name, Docs: cfg.Docs, MinTokens: cfg.MinTokens, MaxTokens: cfg.MaxTokens,
		Seed: cfg.Seed, AnswerTokens: cfg.AnswerTokens, Peer: cfg.Peer}
	docs, err := res.corpus(st.Models().Paths()[name], cfg)
	if err != nil {
		return nil, err
	}
	// Each level's requests name the level before the document, so that
	// a level finds only the shared instruction in a prefix cache, not the
	// documents an earlier level sent (which a cache would serve whole).
	levelBodies := func(level int) ([][]byte, error) {
		bodies := make([][]byte, len(docs))
		for i, d := range docs {
			if level > 0 {
				d.Text = fmt.Sprintf("(Run %d.) %s", level+1, d.Text)
			}
			var err error
			if bodies[i], err = documentRequest(name, cfg.Instruction, d, cfg.AnswerTokens); err != nil {
				return nil, err
			}
		}
		return bodies, nil
	}
	usage := &usageLog{byJob: map[string]contracts.Usage{}}
	sub, err := st.Conn().Subscribe(contracts.UsageSubject(Tenant), usage.record)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()

	fmt.Fprintf(w, "model %s (context %d), %d documents of %d-%d tokens (mean %.0f, seed %d), instruction %d tokens, max_tokens %d, CPU %s\n",
		name, res.Context, cfg.Docs, cfg.MinTokens, cfg.MaxTokens, res.DocTokens, cfg.Seed, res.InstructionTokens, cfg.AnswerTokens, res.CPU)
	fmt.Fprintln(w, "TTFT: streamed, request sent to first content chunk; doc: request sent to the end of the stream")
	paths := []struct {
		name, addr string
		client     *http.Client
	}{{"stack", addr, http.DefaultClient}}
	if cfg.Peer != "" {
		fmt.Fprintf(w, "peer: the OpenAI-compatible server at %s, after the stack at each level\n", cfg.Peer)
		// A connection a request: llama-server may close an idle kept-alive
		// connection as the next request is written to it.
		paths = append(paths, struct {
			name, addr string
			client     *http.Client
		}{"peer", cfg.Peer, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
	}
	for level, clients := range cfg.Concurrency {
		bodies, err := levelBodies(level)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "%s, %d clients: %d documents ...\n", p.name, clients, len(docs))
			}
			runs := make([]docRun, len(docs))
			_, took, _ := runClients(len(docs), clients, func(i int) error {
				runs[i] = streamDocument(ctx, p.client, p.addr, Tenant, bodies[i])
				return nil
			})
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var records map[string]contracts.Usage
			if p.name == "stack" {
				records = usage.await(ctx, runs, 30*time.Second)
			}
			res.Rows = append(res.Rows, summarizeDocuments(p.name, clients, runs, took, records))
		}
	}
	return res, res.WriteTable(w)
}

// corpus reads the model's tokenizer and context from its file, generates
// the documents with it and checks that the longest fits the context with
// the instruction and the answer.
func (r *DocumentsResults) corpus(path string, cfg DocumentsConfig) ([]Document, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	if n, ok := f.Uint(f.Architecture() + ".context_length"); ok {
		r.Context = int(n)
	}
	count := func(s string) int { return len(tok.Encode(s, tokenizer.EncodeOptions{})) }
	r.InstructionTokens = count(cfg.Instruction)
	// 32 tokens for the chat template's markers around the two messages.
	if need := cfg.MaxTokens + r.InstructionTokens + cfg.AnswerTokens + 32; r.Context > 0 && need > r.Context {
		return nil, fmt.Errorf("bench: documents of up to %d tokens, the %d-token instruction and %d answer tokens (%d with the chat template) do not fit the context of %d: lower the document tokens (--doc-tokens) or use a model of a longer context",
			cfg.MaxTokens, r.InstructionTokens, cfg.AnswerTokens, need, r.Context)
	}
	docs, err := GenerateDocuments(cfg.Docs, cfg.MinTokens, cfg.MaxTokens, cfg.Seed, count)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		r.DocTokens += float64(d.Tokens) / float64(len(docs))
	}
	return docs, nil
}

// documentRequest is the chat completion of one document: the shared
// instruction as the system message, the document as the user's, the
// answer constrained to DocumentSchema, streamed with the usage chunk.
// Both the gateway and llama-server take this shape.
func documentRequest(model, instruction string, d Document, answerTokens int) ([]byte, error) {
	return json.Marshal(map[string]any{
		"model": model,
		"messages": []map[string]string{
			{"role": "system", "content": instruction},
			{"role": "user", "content": d.Text},
		},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": "document_summary", "strict": true, "schema": json.RawMessage(DocumentSchema)}},
		"max_tokens":     answerTokens,
		"temperature":    0,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
	})
}

// streamDocument posts one streamed chat completion (body) to addr as
// tenant (the gateway's tenant header) and reads its SSE stream to [DONE];
// a failure is in the run's code and err.
func streamDocument(ctx context.Context, client *http.Client, addr, tenant string, body []byte) (r docRun) {
	r.start = time.Now()
	fail := func(code string, err error) docRun {
		r.code, r.err, r.end = code, err, time.Now()
		return r
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return fail("transport", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(gateway.TenantHeader, tenant)
	resp, err := client.Do(req)
	if err != nil {
		return fail("transport", err)
	}
	defer resp.Body.Close()
	r.jobID = resp.Header.Get(gateway.JobIDHeader)
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fail(errorCode(msg, resp.StatusCode), fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg)))
	}
	var content strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			r.end, r.content = time.Now(), content.String()
			return r
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens        int `json:"prompt_tokens"`
				CompletionTokens    int `json:"completion_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
			// Timings is llama-server's: PromptN counts the prompt tokens
			// it computed, the rest came from its cache.
			Timings *struct {
				PromptN *int `json:"prompt_n"`
			} `json:"timings"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return fail("bad_stream", fmt.Errorf("SSE chunk %q: %w", data, err))
		}
		if len(chunk.Error) > 0 && string(chunk.Error) != "null" {
			return fail(errorCode(data, http.StatusOK), fmt.Errorf("stream error: %s", chunk.Error))
		}
		if u := chunk.Usage; u != nil {
			r.prompt, r.output = u.PromptTokens, u.CompletionTokens
			switch {
			case u.PromptTokensDetails != nil:
				r.cached = u.PromptTokensDetails.CachedTokens
			case chunk.Timings != nil && chunk.Timings.PromptN != nil:
				r.cached = max(u.PromptTokens-*chunk.Timings.PromptN, 0)
			}
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != "" {
				if r.first.IsZero() {
					r.first = time.Now()
				}
				content.WriteString(c.Delta.Content)
			}
			if c.FinishReason != "" {
				r.finish = c.FinishReason
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fail("transport", err)
	}
	return fail("bad_stream", errors.New("SSE stream ended without [DONE]"))
}

// errorCode names the failure of an error body ({"error": {"code": …,
// "type": …}}): its code when it is a string (the gateway's), else its
// type (llama-server's codes are HTTP statuses), else http_<status>.
func errorCode(body []byte, status int) string {
	var e struct {
		Error struct {
			Code any    `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		if c, ok := e.Error.Code.(string); ok && c != "" {
			return c
		}
		if e.Error.Type != "" {
			return e.Error.Type
		}
	}
	return fmt.Sprintf("http_%d", status)
}

// validAnswer reports whether an answer parses as DocumentSchema's object
// and keeps to its bounds.
func validAnswer(content string) bool {
	var a struct {
		Title    *string `json:"title"`
		Category *string `json:"category"`
		Pages    *int    `json:"pages"`
	}
	dec := json.NewDecoder(strings.NewReader(content))
	dec.DisallowUnknownFields()
	if dec.Decode(&a) != nil || dec.More() || a.Title == nil || a.Category == nil || a.Pages == nil {
		return false
	}
	return utf8.RuneCountInString(*a.Title) <= 40 && *a.Pages >= 1 && *a.Pages <= 99 &&
		slices.Contains([]string{"report", "letter", "manual", "story"}, *a.Category)
}

// summarizeDocuments sums up one level of one path: runs took took, and
// records are the stack's usage records by job (nil for the peer).
func summarizeDocuments(path string, clients int, runs []docRun, took time.Duration, records map[string]contracts.Usage) DocumentsRow {
	row := DocumentsRow{Path: path, Concurrency: clients, Docs: len(runs), Seconds: took.Seconds()}
	var ttft, whole []float64
	var kv, shared float64
	var preempt, recomputed int
	for _, r := range runs {
		if r.code != "" {
			if row.Failures == nil {
				row.Failures = map[string]int{}
			}
			row.Failures[r.code]++
			continue
		}
		row.OK++
		if validAnswer(r.content) {
			row.Valid++
		}
		row.PromptTokens += r.prompt
		row.CachedTokens += r.cached
		row.OutputTokens += r.output
		first := r.first
		if first.IsZero() { // no content at all: its first token came with the end
			first = r.end
		}
		ttft = append(ttft, millis(first.Sub(r.start)))
		whole = append(whole, millis(r.end.Sub(r.start)))
		if u, ok := records[r.jobID]; ok && r.jobID != "" {
			row.Usage++
			kv += u.MemoryAllocatedMB
			shared += u.SharedMemoryMB
			preempt += u.Preemptions
			recomputed += u.RecomputedTokens
		}
	}
	if s := took.Seconds(); s > 0 {
		row.DocsPerHour = float64(row.OK) * 3600 / s
		row.PromptPerS = float64(row.PromptTokens) / s
		row.OutputPerS = float64(row.OutputTokens) / s
	}
	if len(ttft) > 0 {
		sort.Float64s(ttft)
		sort.Float64s(whole)
		row.TTFTP50, row.TTFTP99 = percentile(ttft, 0.5), percentile(ttft, 0.99)
		row.DocP50, row.DocP99 = percentile(whole, 0.5), percentile(whole, 0.99)
	}
	if row.Usage > 0 {
		n := float64(row.Usage)
		row.KVMBPerDoc, row.SharedKVMBPerDoc = kv/n, shared/n
		row.PreemptionsPerDoc, row.RecomputedPerDoc = float64(preempt)/n, float64(recomputed)/n
	}
	return row
}

// usageLog keeps the usage records the worker publishes, by job.
type usageLog struct {
	mu    sync.Mutex
	byJob map[string]contracts.Usage
}

// record is the usage subscription's handler.
func (l *usageLog) record(m *nats.Msg) {
	var u contracts.Usage
	if json.Unmarshal(m.Data, &u) != nil || u.JobID == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// A redelivered job's last attempt counts.
	if old, ok := l.byJob[u.JobID]; !ok || u.Attempt >= old.Attempt {
		l.byJob[u.JobID] = u
	}
}

// await returns the records of the answered runs' jobs, once every one has
// come or after wait.
func (l *usageLog) await(ctx context.Context, runs []docRun, wait time.Duration) map[string]contracts.Usage {
	deadline := time.Now().Add(wait)
	for {
		l.mu.Lock()
		out := map[string]contracts.Usage{}
		missing := 0
		for _, r := range runs {
			if r.code != "" || r.jobID == "" {
				continue
			}
			if u, ok := l.byJob[r.jobID]; ok {
				out[r.jobID] = u
			} else {
				missing++
			}
		}
		l.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WriteTable writes one line per row, the failures by code, then the
// stack's documents per hour over the peer's at each level.
func (r *DocumentsResults) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tclients\tdocs\tok\tvalid\tprompt/doc\tcached/doc\tout/doc\tdocs/h\tprompt tok/s\tout tok/s\tTTFT p50 ms\tTTFT p99 ms\tdoc p50 s\tdoc p99 s\tKV MiB/doc\tshared MiB/doc\tpreempt/doc\trecomp tok/doc\t")
	for _, row := range r.Rows {
		per := func(n int) float64 {
			if row.OK == 0 {
				return 0
			}
			return float64(n) / float64(row.OK)
		}
		kv := "-\t-\t-\t-"
		if row.Usage > 0 {
			kv = fmt.Sprintf("%.1f\t%.1f\t%.2f\t%.0f", row.KVMBPerDoc, row.SharedKVMBPerDoc, row.PreemptionsPerDoc, row.RecomputedPerDoc)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.1f\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t%.2f\t%.2f\t%s\t\n",
			row.Path, row.Concurrency, row.Docs, row.OK, row.Valid, per(row.PromptTokens), per(row.CachedTokens), per(row.OutputTokens),
			row.DocsPerHour, row.PromptPerS, row.OutputPerS, row.TTFTP50, row.TTFTP99, row.DocP50/1000, row.DocP99/1000, kv)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, row := range r.Rows {
		if len(row.Failures) == 0 {
			continue
		}
		var codes []string
		for c, n := range row.Failures {
			codes = append(codes, fmt.Sprintf("%s ×%d", c, n))
		}
		sort.Strings(codes)
		if _, err := fmt.Fprintf(w, "failures, %s at %d clients: %s\n", row.Path, row.Concurrency, strings.Join(codes, ", ")); err != nil {
			return err
		}
	}
	if ratios := r.PeerRatios(); len(ratios) > 0 {
		var parts []string
		for _, c := range slices.Sorted(maps.Keys(ratios)) {
			parts = append(parts, fmt.Sprintf("%d clients %.2f", c, ratios[c]))
		}
		_, err := fmt.Fprintf(w, "stack ÷ peer documents/hour: %s\n", strings.Join(parts, ", "))
		return err
	}
	return nil
}

// PeerRatios is the stack's documents per hour over the peer's, by
// level; empty without a peer, and without a level where the peer
// answered a document.
func (r *DocumentsResults) PeerRatios() map[int]float64 {
	out := map[int]float64{}
	for _, s := range r.Rows {
		for _, p := range r.Rows {
			if s.Path == "stack" && p.Path == "peer" && s.Concurrency == p.Concurrency && p.DocsPerHour > 0 {
				out[s.Concurrency] = s.DocsPerHour / p.DocsPerHour
			}
		}
	}
	return out
}

// WriteJSON writes the results as one JSON object, with the ratios to the
// peer by level.
func (r *DocumentsResults) WriteJSON(w io.Writer) error {
	ratios := map[string]float64{}
	for c, v := range r.PeerRatios() {
		ratios[fmt.Sprint(c)] = v
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*DocumentsResults
		TTFT   string             `json:"ttft"`
		Ratios map[string]float64 `json:"stack_over_peer_docs_per_hour,omitempty"`
	}{r, "streamed: request sent to first content chunk", ratios})
}

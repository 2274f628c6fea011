package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer"
)

// ServeConfig configures Serve.
type ServeConfig struct {
	// Concurrency lists the numbers of clients, one level each, in order.
	// Defaults to 1, 16, 32.
	Concurrency []int
	// Tokens is each completion's max_tokens. Defaults to 64.
	Tokens int
	// Requests is the number of completions of each level, shared by its
	// clients. Defaults to 0: max(2×clients, 8).
	Requests int
	// Prompt is every completion's user message. Defaults to "Once upon a
	// time".
	Prompt string
	// Peer is the host:port of another OpenAI-compatible server (such as
	// llama-server on the same GGUF file) to load the same way, path
	// "peer", after the stack's two paths at each level; "" for none. Its
	// completions ask it to ignore end of sequence and not to reuse the
	// prompt's cache (llama-server's ignore_eos and cache_prompt).
	Peer string
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ServeConfig) WithDefaults() ServeConfig {
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 16, 32}
	}
	if c.Tokens == 0 {
		c.Tokens = 64
	}
	if c.Prompt == "" {
		c.Prompt = "Once upon a time"
	}
	return c
}

func (c ServeConfig) validate() error {
	for _, n := range c.Concurrency {
		if n <= 0 {
			return fmt.Errorf("bench: serve concurrency %d: want 1 or more clients per level", n)
		}
	}
	switch {
	case c.Tokens < 0:
		return fmt.Errorf("bench: serve tokens %d: want 1 or more (0: 64)", c.Tokens)
	case c.Requests < 0:
		return fmt.Errorf("bench: serve requests %d: want 1 or more per level (0: max(2×clients, 8))", c.Requests)
	}
	return nil
}

// requests is the number of completions of a level of clients.
func (c ServeConfig) requests(clients int) int {
	if c.Requests > 0 {
		return c.Requests
	}
	return max(2*clients, 8)
}

// ServeResults are the measurements of Serve: one row per level and
// path, the HTTP gateway's first.
type ServeResults struct {
	// CPU names the machine's processor.
	CPU  string
	Rows []ServeRow
}

// ServeRow is one level of clients through one path.
type ServeRow struct {
	// Path is "http" (the gateway's SSE stream) or "go" (the Go producer's
	// events).
	Path        string
	Concurrency int
	Requests    int
	// Prompt is the prompt tokens of a request (their mean), from the
	// usage: a chat template makes it the server's own.
	Prompt float64
	// Tokens is the output tokens of every request, from their usage;
	// Short counts the requests that stopped before max_tokens (the model
	// ended its answer: the gateway has no way to ignore end of sequence).
	Tokens, Short int
	// TokensPerS is Tokens over the level's wall time.
	TokensPerS float64
	// TTFT is request start to first content, TPOT the time per output
	// token after the first, p50 and p99 in milliseconds.
	TTFTP50, TTFTP99, TPOTP50, TPOTP99 float64
}

// served is what one streamed completion measured.
type served struct {
	start, first, end time.Time
	tokens, prompt    int
}

// Serve runs llama-server's benchmark shape through st, which must serve
// the HTTP gateway (devstack.Config.HTTPAddr): for each level of
// cfg.Concurrency that many clients send streamed chat completions back
// to back, through the gateway's /v1/chat/completions (SSE), then the
// same through the Go producer (submit, follow the events), as tenant
// Tenant. It writes a table of aggregate output tokens per second, time
// to first token and time per output token per level and path to w, then
// the ratio of the two paths' throughputs. The gateway cannot ask to
// ignore end of sequence: the Short column counts the completions the
// model ended early.
func Serve(ctx context.Context, st *devstack.Stack, cfg ServeConfig, w io.Writer) (*ServeResults, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	addr, err := gatewayAddr(st)
	if err != nil {
		return nil, err
	}
	c, err := producer.New(st.Conn(), producer.Config{Tenant: Tenant, Models: st.Models().Paths()})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	name := st.Models().Names()[0]
	body, err := json.Marshal(map[string]any{"model": name, "messages": []map[string]string{{"role": "user", "content": cfg.Prompt}},
		"max_tokens": cfg.Tokens, "stream": true, "stream_options": map[string]bool{"include_usage": true}})
	if err != nil {
		return nil, err
	}
	viaHTTP := func() (served, error) { return streamChat(ctx, http.DefaultClient, addr, string(body)) }
	peerBody, err := json.Marshal(map[string]any{"model": name, "messages": []map[string]string{{"role": "user", "content": cfg.Prompt}},
		"max_tokens": cfg.Tokens, "stream": true, "stream_options": map[string]bool{"include_usage": true},
		"ignore_eos": true, "cache_prompt": false})
	if err != nil {
		return nil, err
	}
	// A connection a request: llama-server may close an idle kept-alive
	// connection as the next request is written to it.
	peerClient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	viaPeer := func() (served, error) { return streamChat(ctx, peerClient, cfg.Peer, string(peerBody)) }
	viaGo := func() (served, error) {
		return streamJob(ctx, c, &contracts.JobRequest{Model: name, MaxTokens: cfg.Tokens, Stream: true,
			Messages: []contracts.Message{{Role: "user", Content: cfg.Prompt}}})
	}
	res := &ServeResults{CPU: cpuModel()}
	fmt.Fprintf(w, "model %s, %d tokens per request, prompt %q, CPU %s\n", name, cfg.Tokens, cfg.Prompt, res.CPU)
	type path struct {
		name string
		one  func() (served, error)
	}
	paths := []path{{"http", viaHTTP}, {"go", viaGo}}
	if cfg.Peer != "" {
		fmt.Fprintf(w, "peer: the OpenAI-compatible server at %s\n", cfg.Peer)
		paths = append(paths, path{"peer", viaPeer})
	}
	// Each level runs through both paths before the next, so that the two
	// see the stack in the same state (its event stream as long, the
	// machine as warm).
	for _, clients := range cfg.Concurrency {
		for _, path := range paths {
			row, err := serveLevel(path.name, clients, cfg.requests(clients), cfg.Tokens, path.one)
			if err != nil {
				return nil, err
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return res, res.WriteTable(w)
}

// serveLevel sends n completions from clients clients and sums them up.
func serveLevel(path string, clients, n, maxTokens int, one func() (served, error)) (ServeRow, error) {
	done := make([]served, n)
	_, took, err := runClients(n, clients, func(i int) (err error) {
		done[i], err = one()
		return err
	})
	if err != nil {
		return ServeRow{}, fmt.Errorf("%s, %d clients: %w", path, clients, err)
	}
	row := ServeRow{Path: path, Concurrency: clients, Requests: n}
	var ttft, tpot []float64
	for _, s := range done {
		if s.first.IsZero() { // no text at all: its first token came with the end
			s.first = s.end
		}
		row.Tokens += s.tokens
		row.Prompt += float64(s.prompt) / float64(n)
		if s.tokens < maxTokens {
			row.Short++
		}
		ttft = append(ttft, millis(s.first.Sub(s.start)))
		if s.tokens > 1 {
			tpot = append(tpot, millis(s.end.Sub(s.first))/float64(s.tokens-1))
		}
	}
	row.TokensPerS = float64(row.Tokens) / took.Seconds()
	sort.Float64s(ttft)
	sort.Float64s(tpot)
	row.TTFTP50, row.TTFTP99 = percentile(ttft, 0.5), percentile(ttft, 0.99)
	if len(tpot) > 0 {
		row.TPOTP50, row.TPOTP99 = percentile(tpot, 0.5), percentile(tpot, 0.99)
	}
	return row, nil
}

// WriteTable writes one line per row, then the HTTP gateway's aggregate
// throughput over the Go producer's for each level (a row of each path,
// one after the other).
func (r *ServeResults) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tclients\trequests\tprompt\ttokens\tshort\ttok/s\tTTFT p50 ms\tTTFT p99 ms\tTPOT p50 ms\tTPOT p99 ms\t")
	for _, r := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t\n",
			r.Path, r.Concurrency, r.Requests, r.Prompt, r.Tokens, r.Short, r.TokensPerS, r.TTFTP50, r.TTFTP99, r.TPOTP50, r.TPOTP99)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var ratios []string
	for i := 0; i+1 < len(r.Rows); i++ {
		if h, g := r.Rows[i], r.Rows[i+1]; h.Path == "http" && g.Path == "go" && h.Concurrency == g.Concurrency && g.TokensPerS > 0 {
			ratios = append(ratios, fmt.Sprintf("%d clients %.2f", h.Concurrency, h.TokensPerS/g.TokensPerS))
		}
	}
	if _, err := fmt.Fprintf(w, "HTTP ÷ Go producer tok/s: %s\n", strings.Join(ratios, ", ")); err != nil {
		return err
	}
	var peer []string
	for _, p := range r.Rows {
		for _, h := range r.Rows {
			if p.Path == "peer" && h.Path == "http" && h.Concurrency == p.Concurrency && p.TokensPerS > 0 {
				peer = append(peer, fmt.Sprintf("%d clients %.2f", h.Concurrency, h.TokensPerS/p.TokensPerS))
			}
		}
	}
	if len(peer) > 0 {
		_, err := fmt.Fprintf(w, "HTTP ÷ peer tok/s: %s\n", strings.Join(peer, ", "))
		return err
	}
	return nil
}

// streamChat posts one streamed chat completion (body asks for the usage
// chunk) and reads its SSE stream to [DONE].
func streamChat(ctx context.Context, client *http.Client, addr, body string) (served, error) {
	s := served{start: time.Now()}
	resp, err := openChat(ctx, client, addr, body)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	chunks, usage := 0, false // content chunks, for a server that sends no usage
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			s.end = time.Now()
			if !usage {
				s.tokens = chunks
			}
			return s, nil
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return s, fmt.Errorf("SSE chunk %q: %w", data, err)
		}
		switch {
		case chunk.Error != nil:
			return s, fmt.Errorf("completion failed: %s", chunk.Error.Message)
		case chunk.Usage != nil:
			s.tokens, s.prompt, usage = chunk.Usage.CompletionTokens, chunk.Usage.PromptTokens, true
		case len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "":
			chunks++
			if s.first.IsZero() {
				s.first = time.Now()
			}
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	return s, errors.New("SSE stream ended without [DONE]")
}

// streamJob submits req through c and follows its events to the final
// one.
func streamJob(ctx context.Context, c *producer.Client, req *contracts.JobRequest) (served, error) {
	s := served{start: time.Now()}
	id, err := c.Submit(ctx, req, nil)
	if err != nil {
		return s, err
	}
	events, done, err := c.Events(ctx, id)
	if err != nil {
		return s, err
	}
	var failed error
	for ev := range events {
		switch ev.Type {
		case contracts.EventDelta:
			if s.first.IsZero() && ev.Text != "" {
				s.first = time.Now()
			}
		case contracts.EventFinal:
			s.end, s.tokens, s.prompt = time.Now(), ev.Usage.OutputTokens, ev.Usage.InputTokens
		case contracts.EventError:
			failed = fmt.Errorf("job %s: %s: %s", id, ev.Error.Code, ev.Error.Message)
		}
	}
	if err := done(); err != nil {
		return s, err
	}
	if failed == nil && s.end.IsZero() {
		failed = fmt.Errorf("job %s: events ended without a final one", id)
	}
	return s, failed
}

// millis is d in milliseconds.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuModel names the processor, from /proc/cpuinfo where there is one,
// else its architecture.
func cpuModel() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return fmt.Sprintf("%s (%d logical CPUs)", strings.TrimSpace(v), runtime.NumCPU())
			}
		}
	}
	return fmt.Sprintf("%s (%d logical CPUs)", runtime.GOARCH, runtime.NumCPU())
}

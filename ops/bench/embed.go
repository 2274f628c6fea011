package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
)

// EmbedConfig configures Embed.
type EmbedConfig struct {
	// Chunks lists the input lengths in tokens, one set of levels each.
	// Defaults to 128, 512.
	Chunks []int
	// Concurrency lists the numbers of clients. Defaults to 1, 16.
	Concurrency []int
	// Requests is the number of requests of each level, shared by its
	// clients, each embedding one chunk. Defaults to 0: max(4×clients, 16).
	Requests int
	// Peer is the host:port of another OpenAI-compatible server with
	// /v1/embeddings (llama-server --embedding --pooling mean on the same
	// GGUF file), loaded the same way after the stack's paths at each
	// level; "" for none.
	Peer string
	// Vocab bounds the token ids of the chunks. Defaults to 32,000.
	Vocab int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c EmbedConfig) WithDefaults() EmbedConfig {
	if len(c.Chunks) == 0 {
		c.Chunks = []int{128, 512}
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 16}
	}
	if c.Vocab == 0 {
		c.Vocab = 32000
	}
	return c
}

func (c EmbedConfig) validate() error {
	for _, n := range c.Concurrency {
		if n <= 0 {
			return fmt.Errorf("bench: embed concurrency %d: want 1 or more clients per level", n)
		}
	}
	for _, n := range c.Chunks {
		if n < 2 {
			return fmt.Errorf("bench: embed chunk of %d tokens: want 2 or more", n)
		}
	}
	if c.Requests < 0 {
		return fmt.Errorf("bench: embed requests %d: want 1 or more per level (0: max(4×clients, 16))", c.Requests)
	}
	return nil
}

// EmbedResults are the measurements of Embed, one row per chunk length,
// level and path.
type EmbedResults struct {
	CPU  string
	Rows []EmbedRow
}

// EmbedRow is one level of clients embedding chunks of one length through
// one path.
type EmbedRow struct {
	// Path is "http" (the gateway's /v1/embeddings), "go" (the Go
	// producer: submit an embedding job, wait for its result) or "peer".
	Path        string
	Chunk       int
	Concurrency int
	Requests    int
	// PerS is embeddings per second over the level's wall time; TokensPerS
	// the input tokens per second.
	PerS, TokensPerS float64
	// Latency p50 and p99 of a request, in milliseconds.
	P50, P99 float64
}

// Embed runs an embedding load through st, which must serve the HTTP
// gateway: for each chunk length and level of clients, requests of one
// chunk each (token ids, so every path embeds exactly the same tokens:
// the first id 1, the beginning of sequence of llama-family vocabularies,
// then ids spread over the vocabulary) through the gateway's
// /v1/embeddings, the Go producer, and cfg.Peer. It writes a table and
// the ratios of the gateway's embeddings per second over the peer's.
func Embed(ctx context.Context, st *devstack.Stack, cfg EmbedConfig, w io.Writer) (*EmbedResults, error) {
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
	res := &EmbedResults{CPU: cpuModel()}
	fmt.Fprintf(w, "model %s, one chunk a request, CPU %s\n", name, res.CPU)
	if cfg.Peer != "" {
		fmt.Fprintf(w, "peer: the OpenAI-compatible server at %s\n", cfg.Peer)
	}
	gw := &http.Client{}
	peer := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, chunk := range cfg.Chunks {
		for _, clients := range cfg.Concurrency {
			n := cfg.Requests
			if n == 0 {
				n = max(4*clients, 16)
			}
			inputs := make([][]int32, n)
			for i := range inputs {
				inputs[i] = embedChunk(i, chunk, cfg.Vocab)
			}
			paths := []embedPath{
				{"http", func(in []int32) error { return postEmbedding(ctx, gw, "http://"+addr, Tenant, name, in) }},
				{"go", func(in []int32) error {
					_, err := c.Embed(ctx, name, []contracts.EmbeddingInput{{Tokens: in}}, nil)
					return err
				}},
			}
			if cfg.Peer != "" {
				paths = append(paths, embedPath{"peer", func(in []int32) error { return postEmbedding(ctx, peer, "http://"+cfg.Peer, "", name, in) }})
			}
			for _, p := range paths {
				lat, took, err := runClients(n, clients, func(i int) error { return p.one(inputs[i]) })
				if err != nil {
					return nil, fmt.Errorf("bench: embed %s, %d-token chunks, %d clients: %w", p.name, chunk, clients, err)
				}
				sort.Float64s(lat)
				res.Rows = append(res.Rows, EmbedRow{Path: p.name, Chunk: chunk, Concurrency: clients, Requests: n,
					PerS: float64(n) / took.Seconds(), TokensPerS: float64(n*chunk) / took.Seconds(),
					P50: percentile(lat, 0.5), P99: percentile(lat, 0.99)})
			}
		}
	}
	return res, res.WriteTable(w)
}

// embedPath is one way Embed sends a chunk: its name and its call.
type embedPath struct {
	name string
	one  func(in []int32) error
}

// embedChunk is request i's chunk of n token ids: 1 first, then ids
// spread over [2, vocab) that differ from request to request.
func embedChunk(i, n, vocab int) []int32 {
	ids := make([]int32, n)
	ids[0] = 1
	for j := 1; j < n; j++ {
		ids[j] = int32(2 + (i*7919+j*104729)%(vocab-2))
	}
	return ids
}

// postEmbedding posts one /v1/embeddings request of one token-array input
// to base (as tenant, when set) and checks that one vector came back.
func postEmbedding(ctx context.Context, client *http.Client, base, tenant, model string, in []int32) error {
	body, err := json.Marshal(map[string]any{"model": model, "input": [][]int32{in}})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/embeddings", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		req.Header.Set(gateway.TenantHeader, tenant) // the dev stack's gateway trusts it
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s/v1/embeddings: %s: %.300s", base, resp.Status, b)
	}
	var out struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Data) != 1 || len(out.Data[0].Embedding) < 3 {
		return fmt.Errorf("POST %s/v1/embeddings: not one embedding (%v): %.300s", base, err, b)
	}
	return nil
}

// WriteTable writes one line per row, then the gateway's embeddings per
// second over the peer's for each chunk length and level.
func (r *EmbedResults) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tchunk\tclients\trequests\temb/s\ttok/s\tp50 ms\tp99 ms\t")
	for _, x := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.0f\t%.1f\t%.1f\t\n", x.Path, x.Chunk, x.Concurrency, x.Requests, x.PerS, x.TokensPerS, x.P50, x.P99)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var peer []string
	for _, p := range r.Rows {
		for _, h := range r.Rows {
			if p.Path == "peer" && h.Path == "http" && h.Chunk == p.Chunk && h.Concurrency == p.Concurrency && p.PerS > 0 {
				peer = append(peer, fmt.Sprintf("%d tokens × %d clients %.2f", h.Chunk, h.Concurrency, h.PerS/p.PerS))
			}
		}
	}
	if len(peer) > 0 {
		_, err := fmt.Fprintf(w, "HTTP ÷ peer embeddings/s: %s\n", strings.Join(peer, ", "))
		return err
	}
	return nil
}
